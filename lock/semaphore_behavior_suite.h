// This header defines the behaviour suite of `Semaphore` (semaphore.h): typed
// tests that run unchanged on the in-memory fake in virtual time
// (lock/lock_behavior_fake_test.cc) and on a real redis-server
// (tests/lock/lock_behavior_real_test.cc), over the same LockTestEnv as the
// lock behaviour suite (lock_behavior_suite.h). Exact virtual-time and
// fault-injection cases are in lock/semaphore_test.cc.
#ifndef DLOCK_LOCK_SEMAPHORE_BEHAVIOR_SUITE_H_
#define DLOCK_LOCK_SEMAPHORE_BEHAVIOR_SUITE_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"

namespace dlock {
namespace test_support {

template <typename Env>
class SemaphoreBehaviorTest : public LockBehaviorTest<Env> {
 protected:
  static SemaphoreOptions Permits(int64_t n) {
    SemaphoreOptions o;
    o.permits = n;
    return o;
  }
  // Live holders on the server (after the scripts' trim).
  int64_t Holders(const std::string& resource) {
    return this->env_->Server({"ZCARD", this->keys_.LockKey(resource)}).integer;
  }
};

TYPED_TEST_SUITE_P(SemaphoreBehaviorTest);

TYPED_TEST_P(SemaphoreBehaviorTest, NeverMoreThanNHoldersEachWithItsOwnTokenAndFence) {
  constexpr int kPermits = 3;
  std::vector<std::unique_ptr<Semaphore>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Semaphore>(this->loop(), this->env_->NewClient(),
                                                  this->Permits(kPermits)));
  }
  std::vector<Lease> held;
  std::set<std::string> tokens;
  int64_t last_fence = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<Lease> permit =
        this->AcquireNow(*clients[i], "pool", this->Ttl(absl::Seconds(60)));
    if (i < kPermits) {
      ASSERT_THAT(permit, IsOk()) << i;
      EXPECT_GT(permit->fence, last_fence);
      last_fence = permit->fence;
      EXPECT_TRUE(tokens.insert(permit->token).second);
      held.push_back(*permit);
    } else {
      EXPECT_THAT(permit, StatusIs(absl::StatusCode::kAborted)) << i;
    }
    EXPECT_LE(this->Holders("pool"), kPermits);
  }
  EXPECT_EQ(this->Holders("pool"), kPermits);
  // Release by token: exactly that permit comes back, once.
  EXPECT_THAT(this->ReleaseNow(*clients[4], held[1]), IsOk());
  EXPECT_THAT(this->ReleaseNow(*clients[4], held[1]),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(this->Holders("pool"), kPermits - 1);
  absl::StatusOr<Lease> next = this->AcquireNow(*clients[3], "pool", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(next, IsOk());
  EXPECT_GT(next->fence, last_fence);
  EXPECT_THAT(this->AcquireNow(*clients[4], "pool", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kAborted));
  for (const Lease& l : {held[0], held[2], *next}) {
    EXPECT_THAT(this->ReleaseNow(*clients[0], l), IsOk());
  }
  EXPECT_FALSE(this->Exists(this->keys_.LockKey("pool")));
}

TYPED_TEST_P(SemaphoreBehaviorTest, CrashedHoldersPermitComesBackAfterItsTtl) {
  Semaphore crashed(this->loop(), this->env_->NewClient(), this->Permits(2));
  Semaphore other(this->loop(), this->env_->NewClient(), this->Permits(2));
  // A long-lived holder keeps the set's key alive: only the trim of expired
  // members can give the crashed holder's permit back.
  absl::StatusOr<Lease> stays = this->AcquireNow(other, "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(stays, IsOk());
  // The holder takes the last permit and never releases or renews it.
  absl::StatusOr<Lease> lost = this->AcquireNow(crashed, "r", this->Ttl(absl::Milliseconds(300)));
  ASSERT_THAT(lost, IsOk());
  EXPECT_THAT(this->AcquireNow(other, "r", this->Ttl(absl::Seconds(10))),
              StatusIs(absl::StatusCode::kAborted));
  this->env_->RunFor(absl::Milliseconds(350));
  absl::StatusOr<Lease> got = this->AcquireNow(other, "r", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(got, IsOk());
  EXPECT_GT(got->fence, lost->fence);
  // The crashed holder's late release or extend touches nothing.
  EXPECT_THAT(this->ReleaseNow(crashed, *lost), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(this->ExtendNow(crashed, *lost, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(this->Holders("r"), 2);
  EXPECT_THAT(this->ReleaseNow(other, *got), IsOk());
  EXPECT_THAT(this->ReleaseNow(other, *stays), IsOk());
}

TYPED_TEST_P(SemaphoreBehaviorTest, ExtendKeepsThePermitPastItsFirstTtl) {
  Semaphore holder(this->loop(), this->env_->NewClient(), this->Permits(1));
  Semaphore other(this->loop(), this->env_->NewClient(), this->Permits(1));
  absl::StatusOr<Lease> permit = this->AcquireNow(holder, "r", this->Ttl(absl::Milliseconds(300)));
  ASSERT_THAT(permit, IsOk());
  this->env_->RunFor(absl::Milliseconds(200));
  absl::StatusOr<Lease> extended = this->ExtendNow(holder, *permit, absl::Seconds(5));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(extended->ttl, absl::Seconds(5));
  EXPECT_EQ(extended->fence, permit->fence);
  this->env_->RunFor(absl::Milliseconds(300));  // past the first TTL
  EXPECT_THAT(this->AcquireNow(other, "r", this->Ttl(absl::Seconds(1))),
              StatusIs(absl::StatusCode::kAborted));
  const int64_t pttl = this->PTtl(this->keys_.LockKey("r"));
  EXPECT_GT(pttl, 4000);  // the set's key lives as long as its latest permit
  EXPECT_LE(pttl, 5001);
  EXPECT_THAT(this->ReleaseNow(holder, *extended), IsOk());
}

TYPED_TEST_P(SemaphoreBehaviorTest, RetryWaiterIsWokenByAReleaseNotByItsBackoff) {
  Transport* t2 = this->env_->NewClient();
  Semaphore holders(this->loop(), this->env_->NewClient(), this->Permits(2));
  Semaphore inner(this->loop(), t2, this->Permits(2));
  RetryLockOptions ro;
  ro.initial_backoff = absl::Seconds(20);  // the timer alone would be far too slow
  ro.max_backoff = absl::Seconds(20);
  ro.jitter = [](absl::Duration cap) { return cap; };
  RetryLock waiter(this->loop(), &inner, ro);
  absl::StatusOr<Lease> a = this->AcquireNow(holders, "r", this->Ttl(absl::Seconds(60)));
  absl::StatusOr<Lease> b = this->AcquireNow(holders, "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  bool done = false;
  absl::StatusOr<Lease> got = absl::UnknownError("not run");
  ASSERT_THAT(waiter.Acquire("r", this->Ttl(absl::Seconds(10), absl::Seconds(60)),
                             [&](absl::StatusOr<Lease> r) {
                               got = std::move(r);
                               done = true;
                             }),
              IsOk());
  this->env_->RunUntil([&] { return waiter.subscriptions() == 1 && waiter.attempts() >= 2; },
                       absl::Seconds(5));
  this->env_->RunFor(absl::Milliseconds(20));
  ASSERT_FALSE(done);
  EXPECT_EQ(waiter.attempts(), 2);
  ASSERT_THAT(this->ReleaseNow(holders, *b), IsOk());
  ASSERT_TRUE(this->env_->RunUntil([&] { return done; }, absl::Seconds(5)));
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(waiter.attempts(), 3);
  EXPECT_EQ(this->Holders("r"), 2);
  EXPECT_THAT(this->ReleaseNow(waiter, *got), IsOk());
  EXPECT_THAT(this->ReleaseNow(holders, *a), IsOk());
}

TYPED_TEST_P(SemaphoreBehaviorTest, LoweringNAdmitsNoOneUntilHoldersDropBelowIt) {
  Semaphore three(this->loop(), this->env_->NewClient(), this->Permits(3));
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Lease> p = this->AcquireNow(three, "r", this->Ttl(absl::Seconds(60)));
    ASSERT_THAT(p, IsOk());
    held.push_back(*p);
  }
  // N is now 2 (a new deployment): the 3 holders keep their permits...
  Semaphore two(this->loop(), this->env_->NewClient(), this->Permits(2));
  EXPECT_THAT(this->AcquireNow(two, "r", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(this->ExtendNow(two, held[0], absl::Seconds(60)), IsOk());
  EXPECT_EQ(this->Holders("r"), 3);
  // ...one leaves: 2 hold, still no room under N = 2...
  EXPECT_THAT(this->ReleaseNow(two, held[0]), IsOk());
  EXPECT_THAT(this->AcquireNow(two, "r", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kAborted));
  // ...another leaves: 1 holds, one newcomer gets in, the next does not.
  EXPECT_THAT(this->ReleaseNow(two, held[1]), IsOk());
  absl::StatusOr<Lease> newcomer = this->AcquireNow(two, "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(newcomer, IsOk());
  EXPECT_THAT(this->AcquireNow(two, "r", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kAborted));
  // Raising N to 4 admits two more at once.
  Semaphore four(this->loop(), this->env_->NewClient(), this->Permits(4));
  absl::StatusOr<Lease> c = this->AcquireNow(four, "r", this->Ttl(absl::Seconds(60)));
  absl::StatusOr<Lease> d = this->AcquireNow(four, "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(d, IsOk());
  EXPECT_THAT(this->AcquireNow(four, "r", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(this->Holders("r"), 4);
  for (const Lease& l : {held[2], *newcomer, *c, *d}) {
    EXPECT_THAT(this->ReleaseNow(four, l), IsOk());
  }
}

TYPED_TEST_P(SemaphoreBehaviorTest, BadArgumentsAreRejectedFromTheCall) {
  Transport* t = this->env_->NewClient();
  int ran = 0;
  auto count = [&](absl::StatusOr<Lease>) { ++ran; };
  for (int64_t permits : {int64_t{0}, int64_t{-1}, kMaxPermits + 1}) {
    Semaphore bad(this->loop(), t, this->Permits(permits));
    EXPECT_THAT(bad.Acquire("r", this->Ttl(absl::Seconds(1)), count),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << permits;
  }
  Semaphore sem(this->loop(), t, this->Permits(2));
  EXPECT_THAT(sem.Acquire("", this->Ttl(absl::Seconds(1)), count),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sem.Acquire(std::string(kMaxResourceLength + 1, 'x'), this->Ttl(absl::Seconds(1)),
                          count),
              StatusIs(absl::StatusCode::kInvalidArgument));
  for (absl::Duration ttl : {absl::ZeroDuration(), absl::Milliseconds(3), absl::Hours(24 * 31)}) {
    EXPECT_THAT(sem.Acquire("r", this->Ttl(ttl), count),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  Lease no_token;
  no_token.resource = "r";
  EXPECT_THAT(sem.Release(no_token, [&](absl::Status) { ++ran; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  no_token.token = "t";
  EXPECT_THAT(sem.Extend(no_token, absl::Milliseconds(1), count),
              StatusIs(absl::StatusCode::kInvalidArgument));
  this->env_->RunFor(absl::Milliseconds(100));
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(this->Exists(this->keys_.LockKey("r")));
}

TYPED_TEST_P(SemaphoreBehaviorTest, AMutexAndASemaphoreOfOneNameSeeForeignData) {
  SimpleLock mutex(this->loop(), this->env_->NewClient());
  Semaphore sem(this->loop(), this->env_->NewClient(), this->Permits(5));
  absl::StatusOr<Lease> m = this->AcquireNow(mutex, "a", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(this->AcquireNow(sem, "a", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->ReleaseNow(sem, *m), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(this->Get(this->keys_.LockKey("a")), Reply::String(m->token));
  absl::StatusOr<Lease> p = this->AcquireNow(sem, "b", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(this->AcquireNow(mutex, "b", this->Ttl(absl::Seconds(60))),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->ReleaseNow(mutex, *p), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(this->Holders("b"), 1);
}

REGISTER_TYPED_TEST_SUITE_P(SemaphoreBehaviorTest,
                            NeverMoreThanNHoldersEachWithItsOwnTokenAndFence,
                            CrashedHoldersPermitComesBackAfterItsTtl,
                            ExtendKeepsThePermitPastItsFirstTtl,
                            RetryWaiterIsWokenByAReleaseNotByItsBackoff,
                            LoweringNAdmitsNoOneUntilHoldersDropBelowIt,
                            BadArgumentsAreRejectedFromTheCall,
                            AMutexAndASemaphoreOfOneNameSeeForeignData);

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_LOCK_SEMAPHORE_BEHAVIOR_SUITE_H_
