// The Redis fenced store on a real redis-server: the behaviour suite
// (redis_store_suite.h) over HiredisTransport on a UvEventLoop, one private
// server per test (append-only, so "down" is kill -9 and "up" a restart
// with the data intact; a stalled write is a SIGSTOPped server), plus the
// blocking wrapper on a UvLoopThread and the script's SHA-1 as the server
// computes it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/fenced/blocking_redis_store.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/fenced/redis_store_script.h"
#include "dlock/fenced/redis_store_suite.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace fenced {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

std::unique_ptr<::dlock::test_support::RedisServer> StartServer() {
  ::dlock::test_support::RedisServerOptions options;
  options.appendonly = true;
  auto server = ::dlock::test_support::RedisServer::Start(options);
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    return nullptr;
  }
  return *std::move(server);
}

class RealStoreEnv : public test_support::FencedStoreTestEnv {
 public:
  RealStoreEnv() : loop_(std::make_unique<UvEventLoop>(uv_.get())), server_(StartServer()) {}

  ~RealStoreEnv() override {
    if (server_ != nullptr && server_->paused()) (void)server_->Resume();
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);
  }

  Transport* NewClient() override {
    HiredisTransportOptions options;
    options.port = server_ != nullptr ? server_->port() : 1;
    auto t = HiredisTransport::Create(uv_.get(), options);
    EXPECT_TRUE(t.ok()) << t.status();
    clients_.push_back(*std::move(t));
    absl::Status up = uv_.ConnectAndWait(*clients_.back());
    EXPECT_TRUE(up.ok()) << up;
    return clients_.back().get();
  }
  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return uv_.RunUntil(done, limit);
  }
  Reply Server(std::vector<std::string> argv) override {
    if (server_ == nullptr) return Reply::Error("no server");
    absl::StatusOr<Reply> r = server_->Command(std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }
  void Down(Transport* client) override {
    ASSERT_THAT(server_->Kill(), IsOk());
    // Until the client has seen the connection go, a command could still be
    // written to the dead socket: wait for it.
    uv_.RunUntil([client] { return !client->connected(); });
  }
  void Up(Transport* client) override {
    ASSERT_THAT(server_->Restart(), IsOk());
    EXPECT_TRUE(uv_.RunUntil([client] { return client->connected(); }, absl::Seconds(20)));
  }
  void Stall(Transport*) override { ASSERT_THAT(server_->Pause(), IsOk()); }
  void Unstall(Transport*) override { ASSERT_THAT(server_->Resume(), IsOk()); }

  ::dlock::test_support::RedisServer* server() { return server_.get(); }

 private:
  ::dlock::test_support::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::unique_ptr<::dlock::test_support::RedisServer> server_;
  std::vector<std::unique_ptr<HiredisTransport>> clients_;
};

TEST(RedisStoreScriptRealTest, TheServerComputesTheSameSha1) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto r = server->Command({"SCRIPT", "LOAD", FencedRedisWriteScript().source()});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->str, FencedRedisWriteScript().sha1());
}

// The blocking wrapper from threads other than the loop's, on a real
// UvLoopThread: the same outcomes as the async store.
TEST(BlockingRedisFencedStoreTest, WritesFromAnotherThreadWithTheStoresOutcomes) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  UvLoopThread thread;
  std::unique_ptr<HiredisTransport> transport;
  std::unique_ptr<RedisFencedStore> store;
  absl::Status made = PostAndWait<absl::Status>(&thread, [&](Completion<absl::Status> done) {
    HiredisTransportOptions options;
    options.port = server->port();
    auto t = HiredisTransport::Create(thread.uv_loop(), options);
    if (!t.ok()) return done(t.status());
    transport = *std::move(t);
    store = std::make_unique<RedisFencedStore>(transport.get());
    done(absl::OkStatus());
  });
  ASSERT_THAT(made, IsOk());
  BlockingRedisFencedStore blocking(&thread, store.get());
  const std::string stock = store->DataKey("sku", "stock:");
  auto r = blocking.Write("sku", 2, RedisWrite().IncrBy(stock, 1));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->values, std::vector<int64_t>{1});
  EXPECT_TRUE(IsStaleFence(blocking.Write("sku", 1, RedisWrite().IncrBy(stock, 1)).status()));
  EXPECT_TRUE(IsBelowFloor(blocking.Write("sku", 2, RedisWrite().IncrBy(stock, -2, 0)).status()));
  EXPECT_THAT(blocking.Write("sku", 0, RedisWrite()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(blocking.HighestFence("sku"), ::dlock::test_support::IsOkAndHolds(2));
  EXPECT_THAT(blocking.HighestFence(""), StatusIs(absl::StatusCode::kInvalidArgument));
  // The transport and store live and die on the loop thread.
  absl::Status freed = PostAndWait<absl::Status>(&thread, [&](Completion<absl::Status> done) {
    store.reset();
    transport.reset();
    done(absl::OkStatus());
  });
  EXPECT_THAT(freed, IsOk());
}

}  // namespace

namespace test_support {
using RealEnvs = ::testing::Types<RealStoreEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RealRedis, RedisFencedStoreTest, RealEnvs);
}  // namespace test_support
}  // namespace fenced
}  // namespace dlock
