// The lock behaviour suite (lock/lock_behavior_suite.h) over TLS: TlsTransport
// connections (rediss://) on a UvEventLoop to a private redis-server with a
// throw-away CA, one per test. The same tests run over plain TCP in
// lock_behavior_real_test.cc and on the fake in lock/lock_behavior_fake_test.cc.
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/transport/uv/tls_test_server.h"
#include "dlock/transport/uv/tls_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace {

class TlsRedisEnv : public test_support::LockTestEnv {
 public:
  TlsRedisEnv() : loop_(std::make_unique<UvEventLoop>(uv_.get())) {
    absl::StatusOr<std::unique_ptr<test_support::TlsTestServer>> server =
        test_support::TlsTestServer::Start();
    if (!server.ok()) {
      ADD_FAILURE() << server.status();
      return;
    }
    server_ = *std::move(server);
  }

  ~TlsRedisEnv() override {
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    // Every handle closed: nothing leaked on the loop.
    EXPECT_EQ(uv_.Close(), 0);
  }

  EventLoop* loop() override { return loop_.get(); }

  Transport* NewClient() override {
    TlsTransportOptions options;
    options.connection.host = "localhost";
    options.connection.port = server_ != nullptr ? server_->tls_port() : 1;
    if (server_ != nullptr) options.tls = server_->client_tls();
    absl::StatusOr<std::unique_ptr<TlsTransport>> t =
        TlsTransport::Create(uv_.get(), options);
    EXPECT_TRUE(t.ok()) << t.status();
    clients_.push_back(*std::move(t));
    // Wait until connected, so tests measure lock behaviour, not connects.
    absl::Status up = uv_.ConnectAndWait(*clients_.back());
    EXPECT_TRUE(up.ok()) << up;
    return clients_.back().get();
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return uv_.RunUntil(done, limit);
  }

  void RunFor(absl::Duration d) override { uv_.RunFor(d); }

  Reply Server(std::vector<std::string> argv) override {
    if (server_ == nullptr) return Reply::Error("no server");
    absl::StatusOr<Reply> r = server_->server().Command(std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  int64_t Subscribers(const std::string& channel) override {
    Reply r = Server({"PUBSUB", "NUMSUB", channel});
    return r.is_array() && r.elements.size() == 2 ? r.elements[1].integer : -1;
  }

  // Generous: sanitizer builds on a loaded 2-core machine running the whole
  // suite in parallel. Still far below the 20 s backoff timers the wake-up
  // tests rule out.
  absl::Duration round_trip() const override { return absl::Milliseconds(250); }

 private:
  test_support::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::unique_ptr<test_support::TlsTestServer> server_;
  std::vector<std::unique_ptr<TlsTransport>> clients_;
};

}  // namespace

namespace test_support {
using TlsEnvs = ::testing::Types<TlsRedisEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(TlsRedis, LockBehaviorTest, TlsEnvs);
}  // namespace test_support
}  // namespace dlock
