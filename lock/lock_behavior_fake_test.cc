// The lock behaviour suite (lock_behavior_suite.h) on the in-memory fake:
// FakeRedis + FakeTransport (1 ms round trip per connection) on a
// ManualEventLoop, in virtual time. The same tests run against a real
// redis-server in tests/lock/lock_behavior_real_test.cc.
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/primitive_behavior_suite.h"
#include "dlock/lock/semaphore_behavior_suite.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

constexpr absl::Duration kRoundTrip = absl::Milliseconds(1);

class FakeRedisEnv : public test_support::LockTestEnv {
 public:
  // A never-used server declared trusted (fences start at 1, RedLock votes
  // at once).
  FakeRedisEnv() : server_(&loop_) { server_.Execute(TrustDataSetCommand(KeyScheme{})); }

  EventLoop* loop() override { return &loop_; }

  Transport* NewClient() override {
    clients_.push_back(std::make_unique<FakeTransport>(&loop_, &server_));
    clients_.back()->SetLatency(kRoundTrip);
    return clients_.back().get();
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    const absl::Time deadline = loop_.Now() + limit;
    loop_.RunUntilIdle();
    while (!done()) {
      if (loop_.pending() == 0) return false;
      if (loop_.NextDeadline() > deadline) {
        loop_.AdvanceTo(deadline);
        return done();
      }
      loop_.RunNext();
    }
    return true;
  }

  void RunFor(absl::Duration d) override { loop_.AdvanceTime(d); }

  Reply Server(std::vector<std::string> argv) override {
    return server_.Execute(std::move(argv));
  }

  int64_t Subscribers(const std::string& channel) override {
    return static_cast<int64_t>(server_.SubscriberCount(channel));
  }

  absl::Duration round_trip() const override { return kRoundTrip; }

 private:
  ManualEventLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<FakeTransport>> clients_;
};

}  // namespace

namespace test_support {
using FakeEnvs = ::testing::Types<FakeRedisEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(FakeRedis, LockBehaviorTest, FakeEnvs);
INSTANTIATE_TYPED_TEST_SUITE_P(FakeRedis, SemaphoreBehaviorTest, FakeEnvs);
using PrimitiveFakeCases = ::testing::Types<
    PrimitiveCase<FakeRedisEnv, WriterKind>, PrimitiveCase<FakeRedisEnv, ReaderKind>,
    PrimitiveCase<FakeRedisEnv, FairKind>, PrimitiveCase<FakeRedisEnv, ResourceSetKind<1>>,
    PrimitiveCase<FakeRedisEnv, ResourceSetKind<3>>>;
INSTANTIATE_TYPED_TEST_SUITE_P(FakeRedis, PrimitiveBehaviorTest, PrimitiveFakeCases);
}  // namespace test_support
}  // namespace dlock
