#include "dlock/tests/env/standalone_env.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dlock {
namespace test_support {

StandaloneRedis::StandaloneRedis() {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    return;
  }
  server_ = *std::move(server);
}

absl::StatusOr<std::unique_ptr<Transport>> StandaloneRedis::NewTransport(uv_loop_t* loop) {
  HiredisTransportOptions options;
  options.port = server_ != nullptr ? server_->port() : 1;
  return HiredisTransport::Create(loop, options);
}

absl::StatusOr<Reply> StandaloneRedis::Command(std::vector<std::string> argv) {
  if (server_ == nullptr) return absl::FailedPreconditionError("no server");
  return server_->Command(std::move(argv));
}

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
