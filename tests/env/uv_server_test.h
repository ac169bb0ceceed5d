// This header defines `UvServerTest`, the fixture of real-server tests that
// run their clients on the test's own thread: one private redis-server per
// test (RedisServer, started with `ServerOptions()`) and `UvClients` for the
// connections. TearDown resumes a server a test left paused, then closes
// every client and expects the loop to close with nothing leaked.
//
// Not thread-safe: the test's thread runs the loop.
#ifndef DLOCK_TESTS_ENV_UV_SERVER_TEST_H_
#define DLOCK_TESTS_ENV_UV_SERVER_TEST_H_

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_clients.h"

namespace dlock {
namespace test_support {

class UvServerTest : public ::testing::Test {
 protected:
  // The options the server starts with (override for ACL users etc.).
  virtual RedisServerOptions ServerOptions() { return {}; }

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(ServerOptions());
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (server_ != nullptr && server_->paused()) {
      EXPECT_THAT(server_->Resume(), IsOk());
    }
    uv_.Close();  // expects nothing leaked on the loop
  }

  UvClients uv_;
  std::unique_ptr<RedisServer> server_;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_UV_SERVER_TEST_H_
