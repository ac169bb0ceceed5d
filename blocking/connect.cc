#include "dlock/blocking/connect.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/blocking/client_options.h"
#include "dlock/blocking/url_transports.h"
#include "dlock/transport/uv/uv_loop_thread.h"

namespace dlock {

absl::StatusOr<std::unique_ptr<BlockingClient>> ConnectBlockingClient(ConnectOptions options) {
  if (options.redis_urls.empty()) {
    return absl::InvalidArgumentError("BlockingClient: no Redis URL given");
  }
  absl::Status valid = blocking_internal::CheckClientOptions(options, options.redis_urls.size());
  if (!valid.ok()) return valid;
  absl::StatusOr<blocking_internal::UrlServers> urls = blocking_internal::ParseServerUrls(options);
  if (!urls.ok()) return urls.status();
  std::vector<std::string> names = urls->names;
  auto owned = std::make_unique<UvLoopThread>();
  UvLoopThread* thread = owned.get();
  // The client keeps the BlockingClientOptions part; the URLs and TLS
  // options live on in the transports' options.
  std::unique_ptr<BlockingClient> client(
      new BlockingClient(static_cast<BlockingClientOptions>(std::move(options)),
                         std::move(owned), thread));
  absl::Status started = client->Start(
      blocking_internal::UrlTransportFactory(thread, *std::move(urls)), std::move(names));
  if (!started.ok()) return started;  // ~BlockingClient tears down
  return client;
}

}  // namespace dlock
