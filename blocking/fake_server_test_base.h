// This header defines `FakeServerTest<Thread>`, the fixture of BlockingClient
// tests over FakeTransports on a real loop thread (only the server is
// fake): one FakeRedis living on the loop thread, `OnLoop` to run code
// there, and a TransportFactory of connections to the fake server.
//
// `Thread` is a LoopThread (UvLoopThread, or StdLoopThread for a test that
// must link no network stack); this header depends on neither.
#ifndef DLOCK_BLOCKING_FAKE_SERVER_TEST_BASE_H_
#define DLOCK_BLOCKING_FAKE_SERVER_TEST_BASE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace test_support {

template <typename Thread>
class FakeServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(OnLoop([this] { server_ = std::make_unique<FakeRedis>(thread_.loop()); }),
                IsOk());
  }
  void TearDown() override {
    // The server's timers live on the loop: destroy it there.
    EXPECT_THAT(OnLoop([this] { server_.reset(); }), IsOk());
  }

  // Runs `fn` on the loop thread and waits.
  template <typename Fn>
  absl::Status OnLoop(Fn fn) {
    return PostAndWait<absl::Status>(&thread_, [&fn](Completion<absl::Status> done) {
      fn();
      done(absl::OkStatus());
    });
  }

  // A factory making `n` connections to the server; `partitioned` of them
  // start partitioned (their Connect fails). It runs on the loop thread.
  BlockingClient::TransportFactory Connections(int n = 1, int partitioned = 0) {
    return [this, n, partitioned](EventLoop* loop)
               -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
      EXPECT_TRUE(thread_.InLoopThread());
      std::vector<std::unique_ptr<Transport>> ts;
      for (int i = 0; i < n; ++i) {
        auto t = std::make_unique<FakeTransport>(loop, server_.get());
        if (i < partitioned) t->Partition();
        ts.push_back(std::move(t));
      }
      return ts;
    };
  }

  // A client over `n` connections; nullptr (and a test failure) if its
  // creation failed.
  std::unique_ptr<BlockingClient> MustCreate(BlockingClientOptions options = {}, int n = 1) {
    absl::StatusOr<std::unique_ptr<BlockingClient>> c =
        BlockingClient::Create(&thread_, Connections(n), std::move(options));
    EXPECT_THAT(c.status(), IsOk());
    return c.ok() ? *std::move(c) : nullptr;
  }

  bool KeyExists(const std::string& key) {
    bool exists = false;
    EXPECT_THAT(OnLoop([&] { exists = server_->Exists(key); }), IsOk());
    return exists;
  }

  Thread thread_;
  std::unique_ptr<FakeRedis> server_;  // loop thread only
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_BLOCKING_FAKE_SERVER_TEST_BASE_H_
