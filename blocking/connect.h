// This header defines `ConnectBlockingClient`: a `BlockingClient`
// (blocking_client.h) from Redis URLs. It starts the client's own
// UvLoopThread and makes one UvTransport per URL (plain, TLS, Sentinel or
// Cluster, as the URL says), so this target (//blocking:connect) links
// libuv, hiredis and OpenSSL; //blocking:blocking_client, which builds a
// client over transports the caller makes (`BlockingClient::Create`, the
// fake included), links none of them.
//
//   ConnectOptions options;
//   options.redis_urls = {"redis://127.0.0.1:6379"};
//   absl::StatusOr<std::unique_ptr<BlockingClient>> client =
//       ConnectBlockingClient(options);
//   if (!client.ok()) return client.status();    // kUnavailable: no server
//   absl::StatusOr<LockGuard> guard =
//       (*client)->Lock("orders/42", absl::Seconds(10), absl::Seconds(3));
//
// The client behaves exactly as one built with Create (see
// blocking_client.h), except that it owns its loop thread: its destructor
// joins it last.
#ifndef DLOCK_BLOCKING_CONNECT_H_
#define DLOCK_BLOCKING_CONNECT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {

// Everything of BlockingClientOptions, plus where the servers are.
struct ConnectOptions : BlockingClientOptions {
  // The Redis server(s), each as accepted by ParseRedisUrl
  // (dlock/transport/uv/redis_url.h):
  //   redis://[[user]:password@]host[:port][/db]
  //   rediss://[[user]:password@]host[:port][/db]   (TLS, see `tls`)
  //   unix://[[user]:password@]/path/to/redis.sock[?db=N]
  //   redis-sentinel://[[user]:password@]host:26379[,host:port...]/mastername
  //       [?db=N&sentinel_user=U&sentinel_password=P]   (the master Sentinel
  //       names, followed across failovers; see sentinel_transport.h)
  // One URL: a single-server lock. Several: RedLock over independent
  // servers (not replicas of one another). A URL without a password takes
  // it from $DLOCK_REDIS_PASSWORD when that is set.
  std::vector<std::string> redis_urls;

  // CA, client certificate and server name for the rediss:// URLs (ignored
  // for the others, so a RedLock may mix them). Defaults: the system's CAs,
  // the URL's host name, no client certificate.
  TlsOptions tls;
};

// Validates `options`, starts the loop thread and connects (within
// `connect_timeout`, which also bounds every later reconnection attempt).
// Returns:
//   kInvalidArgument: no URL, a URL ParseRedisUrl rejects (the message
//     names its index, never the password), a non-positive timeout, or an
//     option that needs a single server (`reentrant`, `fair`,
//     `min_replicas`) with several URLs;
//   kUnavailable: the server (RedLock: a quorum of the servers) could not
//     be reached within `connect_timeout`; the message names each address
//     and why. Never blocks much longer than `connect_timeout`.
absl::StatusOr<std::unique_ptr<BlockingClient>> ConnectBlockingClient(ConnectOptions options);

}  // namespace dlock

#endif  // DLOCK_BLOCKING_CONNECT_H_
