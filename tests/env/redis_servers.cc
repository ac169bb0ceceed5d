#include "dlock/tests/env/redis_servers.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace test_support {

absl::StatusOr<std::vector<std::unique_ptr<RedisServer>>> StartRedisServers(
    int n, const RedisServerOptions& options) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start(options);
    if (!s.ok()) return s.status();
    servers.push_back(*std::move(s));
  }
  return servers;
}

std::string RedisUrl(const RedisServer& server) {
  return absl::StrCat("redis://127.0.0.1:", server.port());
}

}  // namespace test_support
}  // namespace dlock
