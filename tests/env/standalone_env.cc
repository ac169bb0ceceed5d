#include "dlock/tests/env/standalone_env.h"

#include <utility>

#include "absl/status/status.h"
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

}  // namespace test_support
}  // namespace dlock
