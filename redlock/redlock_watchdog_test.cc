// RedLock composed with the Watchdog (//watchdog), on FakeRedis servers in
// virtual time: the watchdog keeps a quorum lease alive through
// RedLock::Extend, and reports the loss of the quorum before the keys can
// expire on the servers.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

constexpr char kResource[] = "jobs/nightly";
constexpr absl::Duration kTtl = absl::Milliseconds(600);

class RedLockWatchdogTest : public ::testing::Test {
 protected:
  RedLockWatchdogTest() {
    for (int i = 0; i < 3; ++i) {
      servers_.push_back(std::make_unique<FakeRedis>(&loop_));
      servers_.back()->Execute(TrustDataSetCommand(KeyScheme{}));  // never used
      conns_.push_back(std::make_unique<FakeTransport>(&loop_, servers_.back().get()));
      conns_.back()->SetLatency(absl::Milliseconds(4));
    }
    RedLockOptions options;
    options.server_timeout = absl::Milliseconds(50);
    options.retry_count = 0;
    std::vector<Transport*> raw;
    for (auto& c : conns_) raw.push_back(c.get());
    absl::StatusOr<std::unique_ptr<RedLock>> lock =
        RedLock::Create(&loop_, raw, options);
    EXPECT_THAT(lock, IsOk());
    redlock_ = *std::move(lock);
    watchdog_ = std::make_unique<Watchdog>(&loop_, redlock_.get());
  }

  ~RedLockWatchdogTest() override {
    watchdog_.reset();
    redlock_.reset();
    conns_.clear();
    servers_.clear();
  }

  Lease AcquireOrDie() {
    std::optional<absl::StatusOr<Lease>> result;
    EXPECT_THAT(redlock_->Acquire(kResource, {kTtl},
                                  [&](absl::StatusOr<Lease> l) { result = std::move(l); }),
                IsOk());
    while (!result.has_value() && loop_.RunNext()) {
    }
    EXPECT_TRUE(result.has_value() && result->ok());
    return result.has_value() && result->ok() ? **result : Lease();
  }

  std::optional<std::string> KeyOn(size_t i) {
    return servers_[i]->GetString(KeyScheme().LockKey(kResource));
  }

  ManualEventLoop loop_;
  std::vector<std::unique_ptr<FakeRedis>> servers_;
  std::vector<std::unique_ptr<FakeTransport>> conns_;
  std::unique_ptr<RedLock> redlock_;
  std::unique_ptr<Watchdog> watchdog_;
};

TEST_F(RedLockWatchdogTest, WatchdogKeepsAQuorumLeaseAliveFarBeyondItsTtl) {
  Lease lease = AcquireOrDie();
  std::optional<absl::Status> lost;
  WatchOptions wopts;
  wopts.on_lost = [&](absl::Status s) { lost = s; };
  absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease, std::move(wopts));
  ASSERT_THAT(watch, IsOk());

  loop_.AdvanceTime(absl::Seconds(10));  // ~16 ttls
  EXPECT_FALSE(lost.has_value());
  EXPECT_TRUE(watch->active());
  EXPECT_TRUE(watch->IsValid());
  EXPECT_GT(watch->lease().deadline, loop_.Now());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(KeyOn(i), lease.token) << "server " << i;
    EXPECT_GT(servers_[i]->PTtl(KeyScheme().LockKey(kResource)), 0);
  }

  // Releasing through the watch stops renewal and frees every server.
  std::optional<absl::Status> released;
  ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
  loop_.AdvanceTime(absl::Seconds(2));
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, IsOk());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(KeyOn(i), std::nullopt) << "server " << i;
  EXPECT_FALSE(lost.has_value());
}

TEST_F(RedLockWatchdogTest, RenewalSurvivesOneServerDown) {
  Lease lease = AcquireOrDie();
  std::optional<absl::Status> lost;
  WatchOptions wopts;
  wopts.on_lost = [&](absl::Status s) { lost = s; };
  absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease, std::move(wopts));
  ASSERT_THAT(watch, IsOk());
  conns_[2]->Partition();
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_FALSE(lost.has_value());
  EXPECT_TRUE(watch->IsValid());
  // The partitioned server's key has expired; the quorum's keys live on.
  EXPECT_EQ(KeyOn(2), std::nullopt);
  EXPECT_EQ(KeyOn(0), lease.token);
  EXPECT_EQ(KeyOn(1), lease.token);
  // Healed, the next renewal re-sets the key there (same token).
  conns_[2]->Heal();
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_EQ(KeyOn(2), lease.token);
}

TEST_F(RedLockWatchdogTest, LosingTheQuorumIsReportedBeforeTheKeysCanExpire) {
  Lease lease = AcquireOrDie();
  std::optional<absl::Status> lost;
  absl::Time lost_at;
  int64_t pttl_at_loss = -1;
  WatchOptions wopts;
  wopts.on_lost = [&](absl::Status s) {
    lost = s;
    lost_at = loop_.Now();
    pttl_at_loss = servers_[0]->PTtl(KeyScheme().LockKey(kResource));
  };
  absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease, std::move(wopts));
  ASSERT_THAT(watch, IsOk());
  loop_.AdvanceTime(absl::Seconds(1));
  ASSERT_FALSE(lost.has_value());
  const absl::Time last_deadline = watch->lease().deadline;

  // Two of three servers unreachable: no renewal can reach a quorum.
  conns_[0]->Partition();
  conns_[1]->Partition();
  loop_.AdvanceTime(absl::Seconds(2));
  ASSERT_TRUE(lost.has_value());
  EXPECT_THAT(*lost, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LE(lost_at, last_deadline);
  // Server 0 (unreachable, its key still there) had time left at the loss:
  // the holder knew before the lock could be taken by anyone else.
  EXPECT_GT(pttl_at_loss, 0);
  EXPECT_FALSE(watch->active());
}

TEST_F(RedLockWatchdogTest, AnotherOwnerOnAQuorumEndsTheWatchWithFailedPrecondition) {
  Lease lease = AcquireOrDie();
  std::optional<absl::Status> lost;
  WatchOptions wopts;
  wopts.on_lost = [&](absl::Status s) { lost = s; };
  absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease, std::move(wopts));
  ASSERT_THAT(watch, IsOk());
  // An operator force-unlocks two servers and someone else takes them.
  for (size_t i : {0, 1}) {
    servers_[i]->Execute({"SET", KeyScheme().LockKey(kResource), "intruder", "PX", "60000"});
  }
  loop_.AdvanceTime(absl::Seconds(1));
  ASSERT_TRUE(lost.has_value());
  EXPECT_THAT(*lost, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(KeyOn(0), "intruder");
  EXPECT_EQ(KeyOn(1), "intruder");
}

}  // namespace
}  // namespace dlock
