// Internal to //blocking:connect (namespace blocking_internal): the
// transports of `ConnectBlockingClient`, from its Redis URLs: each URL parsed once
// (ParseRedisUrl, TransportOptionsForUrl, the client's TLS options and
// connect timeout), then a transport factory that makes one UvTransport per
// URL on the client's loop thread. Not part of the API.
#ifndef DLOCK_BLOCKING_URL_TRANSPORTS_H_
#define DLOCK_BLOCKING_URL_TRANSPORTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/connect.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/transport/uv/uv_transport.h"

namespace dlock {
namespace blocking_internal {

struct UrlServers {
  std::vector<UvTransportOptions> servers;
  // Each URL as Display() shows it (never the password): the servers' names.
  std::vector<std::string> names;
};

// Parses `options.redis_urls`. kInvalidArgument naming the URL's index (and
// never its password) for a URL ParseRedisUrl rejects.
absl::StatusOr<UrlServers> ParseServerUrls(const ConnectOptions& options);

// A factory that makes the UvTransport of each server on `thread`'s uv loop
// (kInvalidArgument naming the server when one cannot be made). `thread`
// must outlive the factory's call.
BlockingClient::TransportFactory UrlTransportFactory(UvLoopThread* thread, UrlServers urls);

}  // namespace blocking_internal
}  // namespace dlock

#endif  // DLOCK_BLOCKING_URL_TRANSPORTS_H_
