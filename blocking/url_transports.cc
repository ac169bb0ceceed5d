#include "dlock/blocking/url_transports.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/redis_url.h"

namespace dlock {
namespace blocking_internal {

absl::StatusOr<UrlServers> ParseServerUrls(const ConnectOptions& options) {
  UrlServers urls;
  for (size_t i = 0; i < options.redis_urls.size(); ++i) {
    absl::StatusOr<RedisUrl> url = ParseRedisUrl(options.redis_urls[i]);
    if (!url.ok()) {
      // ParseRedisUrl's message never repeats a password.
      return absl::InvalidArgumentError(
          absl::StrCat("BlockingClient: redis_urls[", i, "]: ", url.status().message()));
    }
    UvTransportOptions t = TransportOptionsForUrl(*url, options.tls);
    t.connection.connect_timeout = options.connect_timeout;
    urls.servers.push_back(std::move(t));
    urls.names.push_back(url->Display());
  }
  return urls;
}

BlockingClient::TransportFactory UrlTransportFactory(UvLoopThread* thread, UrlServers urls) {
  return [thread, urls = std::move(urls)](
             EventLoop*) -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    std::vector<std::unique_ptr<Transport>> transports;
    for (size_t i = 0; i < urls.servers.size(); ++i) {
      absl::StatusOr<std::unique_ptr<UvTransport>> t =
          UvTransport::Create(thread->uv_loop(), urls.servers[i]);
      if (!t.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("BlockingClient: ", urls.names[i], ": ", t.status().message()));
      }
      transports.push_back(*std::move(t));
    }
    return transports;
  };
}

}  // namespace blocking_internal
}  // namespace dlock
