// The Redis fenced store on the in-memory fake: the behaviour suite
// (redis_store_suite.h) on FakeRedis + FakeTransport (1 ms round trip) in
// virtual time, plus what only the fake can arrange: a cluster transport,
// a closed transport, the script's SHA-1 constant.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/fenced/redis_store_script.h"
#include "dlock/fenced/redis_store_suite.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace fenced {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

constexpr absl::Duration kRoundTrip = absl::Milliseconds(1);

bool RunManual(ManualEventLoop& loop, const std::function<bool()>& done,
               absl::Duration limit) {
  const absl::Time deadline = loop.Now() + limit;
  loop.RunUntilIdle();
  while (!done()) {
    if (loop.pending() == 0) return false;
    if (loop.NextDeadline() > deadline) {
      loop.AdvanceTo(deadline);
      return done();
    }
    loop.RunNext();
  }
  return true;
}

class FakeStoreEnv : public test_support::FencedStoreTestEnv {
 public:
  FakeStoreEnv() : server_(&loop_) {}

  Transport* NewClient() override {
    clients_.push_back(std::make_unique<FakeTransport>(&loop_, &server_));
    clients_.back()->SetLatency(kRoundTrip);
    return clients_.back().get();
  }
  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return RunManual(loop_, done, limit);
  }
  Reply Server(std::vector<std::string> argv) override {
    return server_.Execute(std::move(argv));
  }
  void Down(Transport* client) override { Fake(client)->Partition(); }
  void Up(Transport* client) override { Fake(client)->Heal(); }
  // The reply is lost: the command applies, the caller times out.
  void Stall(Transport* client) override { Fake(client)->DropNextReplies(1); }
  void Unstall(Transport*) override {}

 private:
  static FakeTransport* Fake(Transport* t) { return static_cast<FakeTransport*>(t); }

  ManualEventLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<FakeTransport>> clients_;
};

// A FakeTransport that says it routes over a Redis Cluster.
class ClusterFlaggedTransport : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  bool cluster() const override { return true; }
};

class RedisFencedStoreFakeTest : public ::testing::Test {
 protected:
  RedisFencedStoreFakeTest() : server_(&loop_), client_(&loop_, &server_) {}

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport client_;
};

TEST_F(RedisFencedStoreFakeTest, ACrossSlotKeyIsRefusedOnAClusterEvenWhenAllowed) {
  ClusterFlaggedTransport cluster(&loop_, &server_);
  RedisFencedStoreOptions o;
  o.allow_cross_slot = true;
  RedisFencedStore store(&cluster, o);
  bool ran = false;
  absl::Status sent = store.Write("r", 1, RedisWrite().Set("stock", "1"),
                                  [&](absl::StatusOr<RedisWriteResult>) { ran = true; });
  EXPECT_THAT(sent, StatusIs(absl::StatusCode::kInvalidArgument));
  // The resource's own tag is fine on a cluster.
  sent = store.Write("r", 1, RedisWrite().Set(store.DataKey("r", "stock:"), "1"),
                     [&](absl::StatusOr<RedisWriteResult> r) {
                       EXPECT_THAT(r, IsOk());
                       ran = true;
                     });
  EXPECT_THAT(sent, IsOk());
  loop_.RunUntilIdle();
  EXPECT_TRUE(ran);
}

TEST_F(RedisFencedStoreFakeTest, ClosingTheTransportCancelsAWriteInFlight) {
  RedisFencedStore store(&client_);
  client_.SetLatency(absl::Milliseconds(10));
  absl::StatusOr<RedisWriteResult> out = absl::UnknownError("not run");
  int calls = 0;
  ASSERT_THAT(store.Write("r", 1, RedisWrite().Set(store.DataKey("r", "k:"), "v"),
                          [&](absl::StatusOr<RedisWriteResult> r) {
                            out = std::move(r);
                            ++calls;
                          }),
              IsOk());
  client_.Close();
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(store.Write("r", 1, RedisWrite(), [](absl::StatusOr<RedisWriteResult>) {}),
              StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(RedisFencedStoreFakeTest, AnErrorReplyIsUnavailableAndNopermIsPermissionDenied) {
  RedisFencedStore store(&client_);
  std::vector<absl::Status> got;
  for (const char* error : {"OOM command not allowed", "NOPERM this user has no permissions"}) {
    client_.FailNextWithReply(1, Reply::Error(error));
    ASSERT_THAT(store.Write("r", 1, RedisWrite(),
                            [&](absl::StatusOr<RedisWriteResult> r) {
                              got.push_back(r.status());
                            }),
                IsOk());
    loop_.RunUntilIdle();
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_THAT(got[0], StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(got[1], StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST(RedisStoreScriptTest, TheSha1ConstantIsTheSourcesSha1) {
  EXPECT_EQ(FencedRedisWriteScript().sha1(), Sha1Hex(FencedRedisWriteScript().source()));
}

}  // namespace

namespace test_support {
using FakeEnvs = ::testing::Types<FakeStoreEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(FakeRedis, RedisFencedStoreTest, FakeEnvs);
}  // namespace test_support
}  // namespace fenced
}  // namespace dlock
