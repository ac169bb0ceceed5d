// This header defines the behaviour suite of the issue-16 primitives that
// are a `Lock`: ReadWriteLock's writer() and reader(), FairLock and
// ResourceSetLock. It is the lock behaviour suite (lock_behavior_suite.h)
// with the lock kind as a parameter: each case below is one of that suite's
// cases, written against a `Kind` that builds the primitive (waiting the way
// it waits: RetryLock, or FairLock's own queue) and reads its state on the
// server. It runs on the fake in virtual time (lock/lock_behavior_fake_test.cc)
// and on a real redis-server (tests/lock/lock_behavior_real_test.cc):
//
//   using Cases = ::testing::Types<PrimitiveCase<MyEnv, FairKind>, ...>;
//   INSTANTIATE_TYPED_TEST_SUITE_P(My, PrimitiveBehaviorTest, Cases);
//
// Where a case's premise does not hold for a kind (two readers do not
// exclude each other), the case says so with GTEST_SKIP.
#ifndef DLOCK_LOCK_PRIMITIVE_BEHAVIOR_SUITE_H_
#define DLOCK_LOCK_PRIMITIVE_BEHAVIOR_SUITE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"

namespace dlock {
namespace test_support {

// One primitive built for a test: its lock() waits when asked to (wait > 0).
class PrimitiveInstance {
 public:
  virtual ~PrimitiveInstance() = default;
  virtual Lock& lock() = 0;
};

namespace primitive_internal {

inline int64_t ServerNowMs(LockTestEnv* env) {
  Reply t = env->Server({"TIME"});
  int64_t s = 0, us = 0;
  if (t.elements.size() != 2 || !absl::SimpleAtoi(t.elements[0].str, &s) ||
      !absl::SimpleAtoi(t.elements[1].str, &us)) {
    ADD_FAILURE() << "TIME: " << t.DebugString();
  }
  return s * 1000 + us / 1000;
}

inline bool KeyExists(LockTestEnv* env, const std::string& key) {
  return env->Server({"EXISTS", key}) == Reply::Integer(1);
}

// A ReadWriteLock view behind a RetryLock (waits with release notifications).
class ReadWriteInstance : public PrimitiveInstance {
 public:
  ReadWriteInstance(EventLoop* loop, Transport* t, const RetryLockOptions& ro, bool writer)
      : rw_(loop, t), retry_(loop, writer ? &rw_.writer() : &rw_.reader(), ro) {}
  Lock& lock() override { return retry_; }

 private:
  ReadWriteLock rw_;
  RetryLock retry_;
};

}  // namespace primitive_internal

struct WriterKind {
  static constexpr bool kExclusive = true;
  static std::unique_ptr<PrimitiveInstance> Make(EventLoop* loop, Transport* t,
                                                 const RetryLockOptions& ro, const std::string&) {
    return std::make_unique<primitive_internal::ReadWriteInstance>(loop, t, ro, true);
  }
  static std::unique_ptr<PrimitiveInstance> MakeBlocker(EventLoop* loop, Transport* t,
                                                        const std::string& resource) {
    return Make(loop, t, RetryLockOptions(), resource);
  }
  static bool Held(LockTestEnv* env, const KeyScheme& keys, const std::string& resource) {
    return primitive_internal::KeyExists(env, keys.LockKey(resource));
  }
  static int64_t RemainingMs(LockTestEnv* env, const KeyScheme& keys, const Lease& lease) {
    return env->Server({"PTTL", keys.LockKey(lease.resource)}).integer;
  }
};

struct ReaderKind {
  static constexpr bool kExclusive = false;
  static std::unique_ptr<PrimitiveInstance> Make(EventLoop* loop, Transport* t,
                                                 const RetryLockOptions& ro, const std::string&) {
    return std::make_unique<primitive_internal::ReadWriteInstance>(loop, t, ro, false);
  }
  // Readers are kept out by a writer.
  static std::unique_ptr<PrimitiveInstance> MakeBlocker(EventLoop* loop, Transport* t,
                                                        const std::string& resource) {
    return WriterKind::Make(loop, t, RetryLockOptions(), resource);
  }
  // A live reader (the blocker, a writer, counts too).
  static bool Held(LockTestEnv* env, const KeyScheme& keys, const std::string& resource) {
    const int64_t now = primitive_internal::ServerNowMs(env);
    Reply all = env->Server({"HGETALL", ReadersKey(keys, resource)});
    for (size_t i = 0; i + 1 < all.elements.size(); i += 2) {
      int64_t expiry = 0;
      if (absl::SimpleAtoi(all.elements[i + 1].str, &expiry) && expiry > now) return true;
    }
    return WriterKind::Held(env, keys, resource);
  }
  // The reader's own entry (the hash's TTL is its latest reader's).
  static int64_t RemainingMs(LockTestEnv* env, const KeyScheme& keys, const Lease& lease) {
    Reply e = env->Server({"HGET", ReadersKey(keys, lease.resource), lease.token});
    int64_t expiry = 0;
    if (!absl::SimpleAtoi(e.str, &expiry)) return -2;
    return expiry - primitive_internal::ServerNowMs(env);
  }
};

struct FairKind {
  static constexpr bool kExclusive = true;
  class Instance : public PrimitiveInstance {
   public:
    Instance(EventLoop* loop, Transport* t) : fair_(loop, t) {}
    Lock& lock() override { return fair_; }

   private:
    FairLock fair_;
  };
  // FairLock waits in its own queue (RetryLock's attempts never queue).
  static std::unique_ptr<PrimitiveInstance> Make(EventLoop* loop, Transport* t,
                                                 const RetryLockOptions&, const std::string&) {
    return std::make_unique<Instance>(loop, t);
  }
  static std::unique_ptr<PrimitiveInstance> MakeBlocker(EventLoop* loop, Transport* t,
                                                        const std::string& resource) {
    return Make(loop, t, RetryLockOptions(), resource);
  }
  // The lock key, or a live waiter's queue entry (the "#next" counter may
  // stay behind: it is not a waiter).
  static bool Held(LockTestEnv* env, const KeyScheme& keys, const std::string& resource) {
    if (primitive_internal::KeyExists(env, keys.LockKey(resource))) return true;
    const std::string queue = absl::StrCat(keys.LockKey(resource), ":queue");
    const int64_t now = primitive_internal::ServerNowMs(env);
    Reply all = env->Server({"HGETALL", queue});
    for (size_t i = 0; i + 1 < all.elements.size(); i += 2) {
      if (all.elements[i].str == "#next") continue;
      const std::string& v = all.elements[i + 1].str;
      int64_t expiry = 0;
      if (!absl::SimpleAtoi(v.substr(v.find(':') + 1), &expiry) || expiry > now) return true;
    }
    return false;
  }
  static int64_t RemainingMs(LockTestEnv* env, const KeyScheme& keys, const Lease& lease) {
    return env->Server({"PTTL", keys.LockKey(lease.resource)}).integer;
  }
};

// A ResourceSetLock of N resources ("<resource>" for 1, "<resource>/1".. for
// more) over RetryLock(SimpleLock); Acquire's label is the resource.
template <int N>
struct ResourceSetKind {
  static constexpr bool kExclusive = true;
  static std::vector<std::string> Members(const std::string& resource) {
    if (N == 1) return {resource};
    std::vector<std::string> out;
    for (int i = 1; i <= N; ++i) out.push_back(absl::StrCat(resource, "/", i));
    return out;
  }
  class Instance : public PrimitiveInstance {
   public:
    Instance(EventLoop* loop, Transport* t, const RetryLockOptions& ro,
             std::vector<std::string> members)
        : simple_(loop, t), retry_(loop, &simple_, ro), set_(loop, &retry_, std::move(members)) {}
    Lock& lock() override { return set_; }

   private:
    SimpleLock simple_;
    RetryLock retry_;
    ResourceSetLock set_;
  };
  static std::unique_ptr<PrimitiveInstance> Make(EventLoop* loop, Transport* t,
                                                 const RetryLockOptions& ro,
                                                 const std::string& resource) {
    return std::make_unique<Instance>(loop, t, ro, Members(resource));
  }
  // Holds only the LAST member (in sorted order): a waiting set takes the
  // others first, so giving up must release them.
  static std::unique_ptr<PrimitiveInstance> MakeBlocker(EventLoop* loop, Transport* t,
                                                        const std::string& resource) {
    return std::make_unique<Instance>(loop, t, RetryLockOptions(),
                                      std::vector<std::string>{Members(resource).back()});
  }
  // Any member held: a set never leaves a strict subset behind.
  static bool Held(LockTestEnv* env, const KeyScheme& keys, const std::string& resource) {
    for (const std::string& m : Members(resource)) {
      if (primitive_internal::KeyExists(env, keys.LockKey(m))) return true;
    }
    return false;
  }
  static int64_t RemainingMs(LockTestEnv* env, const KeyScheme& keys, const Lease& lease) {
    int64_t least = -2;
    for (const std::string& m : Members(lease.resource)) {
      const int64_t p = env->Server({"PTTL", keys.LockKey(m)}).integer;
      if (least == -2 || p < least) least = p;
    }
    return least;
  }
};

template <typename E, typename K>
struct PrimitiveCase {
  using Env = E;
  using Kind = K;
};

template <typename Case>
class PrimitiveBehaviorTest : public LockBehaviorTest<typename Case::Env> {
 protected:
  using Kind = typename Case::Kind;

  // A new primitive on a new connection (one more process).
  std::unique_ptr<PrimitiveInstance> Make(const std::string& resource,
                                          RetryLockOptions ro = RetryLockOptions()) {
    return Kind::Make(this->loop(), this->env_->NewClient(), ro, resource);
  }
  std::unique_ptr<PrimitiveInstance> Blocker(const std::string& resource) {
    return Kind::MakeBlocker(this->loop(), this->env_->NewClient(), resource);
  }
  bool Held(const std::string& resource) {
    return Kind::Held(this->env_.get(), this->keys_, resource);
  }
  int64_t RemainingMs(const Lease& lease) {
    return Kind::RemainingMs(this->env_.get(), this->keys_, lease);
  }
  // Backoff timers that never fire within a test: only notifications wake.
  static RetryLockOptions SlowRetry() {
    RetryLockOptions ro;
    ro.initial_backoff = absl::Seconds(20);
    ro.max_backoff = absl::Seconds(20);
    ro.jitter = [](absl::Duration cap) { return cap; };
    return ro;
  }
  static RetryLockOptions FastRetry() {
    RetryLockOptions ro;
    ro.initial_backoff = absl::Milliseconds(10);
    ro.max_backoff = absl::Milliseconds(40);
    return ro;
  }
};

TYPED_TEST_SUITE_P(PrimitiveBehaviorTest);

TYPED_TEST_P(PrimitiveBehaviorTest, AcquireHoldsAndReleaseFrees) {
  auto p = this->Make("orders/42");
  absl::StatusOr<Lease> lease =
      this->AcquireNow(p->lock(), "orders/42", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->resource, "orders/42");
  EXPECT_FALSE(lease->token.empty());
  EXPECT_EQ(lease->ttl, absl::Seconds(10));
  EXPECT_LE(lease->deadline, this->loop()->Now() + absl::Seconds(10));
  EXPECT_TRUE(this->Held("orders/42"));
  EXPECT_GT(this->RemainingMs(*lease), 9000);
  EXPECT_THAT(this->ReleaseNow(p->lock(), *lease), IsOk());
  EXPECT_FALSE(this->Held("orders/42"));
  // Releasing again: the lease no longer owns anything.
  EXPECT_THAT(this->ReleaseNow(p->lock(), *lease),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TYPED_TEST_P(PrimitiveBehaviorTest, SecondAcquireIsAbortedWhileHeld) {
  if (!TypeParam::Kind::kExclusive) GTEST_SKIP() << "readers share: two readers never exclude";
  auto a = this->Make("r");
  auto b = this->Make("r");
  absl::StatusOr<Lease> first = this->AcquireNow(a->lock(), "r", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(this->AcquireNow(b->lock(), "r", this->Ttl(absl::Seconds(10))),
              StatusIs(absl::StatusCode::kAborted));
  // The same lock object does not re-enter either.
  EXPECT_THAT(this->AcquireNow(a->lock(), "r", this->Ttl(absl::Seconds(10))),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_GT(this->RemainingMs(*first), 9000);
  EXPECT_THAT(this->ReleaseNow(a->lock(), *first), IsOk());
}

// A kind-specific holder (for readers: a writer) keeps a new acquire out.
TYPED_TEST_P(PrimitiveBehaviorTest, BlockerKeepsAnAcquireOutUntilItReleases) {
  auto holder = this->Blocker("r");
  auto p = this->Make("r");
  absl::StatusOr<Lease> held = this->AcquireNow(holder->lock(), "r", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(held, IsOk());
  EXPECT_THAT(this->AcquireNow(p->lock(), "r", this->Ttl(absl::Seconds(10))),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(this->ReleaseNow(holder->lock(), *held), IsOk());
  absl::StatusOr<Lease> mine = this->AcquireNow(p->lock(), "r", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(mine, IsOk());
  EXPECT_THAT(this->ReleaseNow(p->lock(), *mine), IsOk());
  EXPECT_FALSE(this->Held("r"));
}

// The design document's GET-then-DEL race: the old owner's lease expired and
// another took the resource; the old owner's release and extend fail and
// leave the new owner's hold alone.
TYPED_TEST_P(PrimitiveBehaviorTest, ExpiredOwnersReleaseLeavesNewOwnersHoldIntact) {
  auto a = this->Make("r");
  auto b = this->Make("r");
  absl::StatusOr<Lease> old_lease =
      this->AcquireNow(a->lock(), "r", this->Ttl(absl::Milliseconds(100)));
  ASSERT_THAT(old_lease, IsOk());
  this->env_->RunFor(absl::Milliseconds(150));
  absl::StatusOr<Lease> new_lease =
      this->AcquireNow(b->lock(), "r", this->Ttl(absl::Seconds(10)));
  ASSERT_THAT(new_lease, IsOk());
  if (TypeParam::Kind::kExclusive) EXPECT_GT(new_lease->fence, old_lease->fence);
  EXPECT_THAT(this->ReleaseNow(a->lock(), *old_lease),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(this->ExtendNow(a->lock(), *old_lease, absl::Seconds(60)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(this->Held("r"));
  EXPECT_GT(this->RemainingMs(*new_lease), 5000);
  EXPECT_LE(this->RemainingMs(*new_lease), 10000);
  EXPECT_THAT(this->ReleaseNow(b->lock(), *new_lease), IsOk());
  EXPECT_FALSE(this->Held("r"));
}

TYPED_TEST_P(PrimitiveBehaviorTest, ExtendAfterExpiryFailsAndCreatesNothing) {
  auto p = this->Make("r");
  absl::StatusOr<Lease> lease = this->AcquireNow(p->lock(), "r", this->Ttl(absl::Milliseconds(100)));
  ASSERT_THAT(lease, IsOk());
  this->env_->RunFor(absl::Milliseconds(150));
  EXPECT_THAT(this->ExtendNow(p->lock(), *lease, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(this->Held("r"));
}

// The document's extend() set EXPIRE to timeout + additional; dlock's
// extend sets the remaining time to exactly the new ttl.
TYPED_TEST_P(PrimitiveBehaviorTest, ExtendSetsTheNewTtlNotASum) {
  auto p = this->Make("r");
  absl::StatusOr<Lease> lease = this->AcquireNow(p->lock(), "r", this->Ttl(absl::Seconds(30)));
  ASSERT_THAT(lease, IsOk());
  const absl::Time before = this->loop()->Now();
  absl::StatusOr<Lease> extended = this->ExtendNow(p->lock(), *lease, absl::Seconds(5));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(extended->ttl, absl::Seconds(5));
  EXPECT_EQ(extended->token, lease->token);
  EXPECT_EQ(extended->fence, lease->fence);
  EXPECT_GE(extended->deadline, before + absl::Seconds(5) - absl::Milliseconds(52));
  EXPECT_LE(extended->deadline, this->loop()->Now() + absl::Seconds(5));
  const int64_t left = this->RemainingMs(*extended);
  EXPECT_LE(left, 5000);
  EXPECT_GT(left, 4000);
  EXPECT_THAT(this->ReleaseNow(p->lock(), *extended), IsOk());
}

TYPED_TEST_P(PrimitiveBehaviorTest, BadArgumentsAreRejectedAndCallbackNeverRuns) {
  auto p = this->Make("r");
  Lock& lock = p->lock();
  int ran = 0;
  auto cb = [&ran](absl::StatusOr<Lease>) { ++ran; };
  const std::string too_long(kMaxResourceLength + 1, 'x');
  EXPECT_THAT(lock.Acquire("r", this->Ttl(absl::ZeroDuration()), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire("r", this->Ttl(absl::Seconds(-1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire("r", this->Ttl(kMaxTtl + absl::Milliseconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire("r", this->Ttl(absl::InfiniteDuration()), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire("", this->Ttl(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire(too_long, this->Ttl(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(lock.Acquire("r", this->Ttl(absl::Seconds(1), absl::Seconds(-1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Lease lease;
  lease.resource = "r";
  lease.token = "t";
  EXPECT_THAT(lock.Extend(lease, absl::ZeroDuration(), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  lease.resource = "";
  EXPECT_THAT(lock.Release(lease, [&ran](absl::Status) { ++ran; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  this->env_->RunFor(absl::Milliseconds(50));
  EXPECT_EQ(ran, 0);
  // Nothing but the fixture's trusted data-set marker.
  EXPECT_EQ(this->env_->Server({"DBSIZE"}), Reply::Integer(1));
}

TYPED_TEST_P(PrimitiveBehaviorTest, FencesStrictlyIncreaseAcrossOwnersAndFreshClients) {
  if (!TypeParam::Kind::kExclusive) {
    GTEST_SKIP() << "a reader's fence is the latest writer's: it does not grow across readers";
  }
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    auto p = this->Make("fenced");  // a fresh object and connection, like a restart
    absl::StatusOr<Lease> lease = this->AcquireNow(p->lock(), "fenced", this->Ttl(absl::Seconds(5)));
    ASSERT_THAT(lease, IsOk());
    EXPECT_GT(lease->fence, last);
    last = lease->fence;
    if (i == 2) {
      // An expired holder, not a released one: the next fence still grows.
      ASSERT_THAT(this->ExtendNow(p->lock(), *lease, absl::Milliseconds(200)), IsOk());
      this->env_->RunFor(absl::Milliseconds(300));
      ASSERT_FALSE(this->Held("fenced"));
    } else {
      ASSERT_THAT(this->ReleaseNow(p->lock(), *lease), IsOk());
    }
  }
}

// A waiter is woken by the holder's release, not by a backoff timer.
TYPED_TEST_P(PrimitiveBehaviorTest, WaiterWakesSoonAfterRelease) {
  auto holder = this->Blocker("r");
  auto waiter = this->Make("r", this->SlowRetry());
  absl::StatusOr<Lease> held = this->AcquireNow(holder->lock(), "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(held, IsOk());
  bool done = false;
  absl::StatusOr<Lease> got = absl::UnknownError("not run");
  ASSERT_THAT(waiter->lock().Acquire("r", this->Ttl(absl::Seconds(10), absl::Seconds(60)),
                                     [&](absl::StatusOr<Lease> r) {
                                       got = std::move(r);
                                       done = true;
                                     }),
              IsOk());
  // Let it meet contention and start waiting.
  this->env_->RunFor(4 * this->env_->round_trip());
  ASSERT_FALSE(done);
  ASSERT_THAT(this->ReleaseNow(holder->lock(), *held), IsOk());
  const absl::Time released = this->loop()->Now();
  ASSERT_TRUE(this->env_->RunUntil([&] { return done; }, absl::Seconds(10)));
  ASSERT_THAT(got, IsOk());
  // Notification + at most a few acquire round trips (far below backoff).
  EXPECT_LE(this->loop()->Now() - released, 5 * this->env_->round_trip());
  EXPECT_THAT(this->ReleaseNow(waiter->lock(), *got), IsOk());
  EXPECT_FALSE(this->Held("r"));
}

TYPED_TEST_P(PrimitiveBehaviorTest, WaiterGivesUpWithDeadlineExceededAndLeavesNothing) {
  auto holder = this->Blocker("r");
  auto waiter = this->Make("r", this->FastRetry());
  absl::StatusOr<Lease> held = this->AcquireNow(holder->lock(), "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(held, IsOk());
  const absl::Time start = this->loop()->Now();
  EXPECT_THAT(this->AcquireNow(waiter->lock(), "r",
                               this->Ttl(absl::Seconds(1), absl::Milliseconds(200))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GE(this->loop()->Now() - start, absl::Milliseconds(200));
  ASSERT_THAT(this->ReleaseNow(holder->lock(), *held), IsOk());
  this->env_->RunFor(absl::Milliseconds(100));
  // The waiter left nothing (no queue entry, no partly held set).
  EXPECT_FALSE(this->Held("r"));
}

TYPED_TEST_P(PrimitiveBehaviorTest, WaiterAcquiresAfterHolderExpiresWithoutNotification) {
  auto holder = this->Blocker("r");
  auto waiter = this->Make("r", this->FastRetry());
  ASSERT_THAT(this->AcquireNow(holder->lock(), "r", this->Ttl(absl::Milliseconds(150))), IsOk());
  absl::StatusOr<Lease> got =
      this->AcquireNow(waiter->lock(), "r", this->Ttl(absl::Seconds(5), absl::Seconds(5)));
  ASSERT_THAT(got, IsOk());
  EXPECT_GT(this->RemainingMs(*got), 4000);
}

TYPED_TEST_P(PrimitiveBehaviorTest, CancelDuringWaitLeavesNothingBehind) {
  auto holder = this->Blocker("r");
  auto waiter = this->Make("r", this->FastRetry());
  absl::StatusOr<Lease> held = this->AcquireNow(holder->lock(), "r", this->Ttl(absl::Seconds(60)));
  ASSERT_THAT(held, IsOk());
  int ran = 0;
  absl::StatusOr<AcquireHandle> h = waiter->lock().Acquire(
      "r", this->Ttl(absl::Seconds(30), absl::Seconds(30)), [&](absl::StatusOr<Lease>) { ++ran; });
  ASSERT_THAT(h, IsOk());
  this->env_->RunFor(absl::Milliseconds(300));
  EXPECT_EQ(ran, 0);
  EXPECT_TRUE(h->Cancel());
  EXPECT_FALSE(h->Cancel());
  // The holder releases: nothing wakes up, nobody takes the lock.
  EXPECT_THAT(this->ReleaseNow(holder->lock(), *held), IsOk());
  this->env_->RunFor(absl::Seconds(1));
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(this->Held("r"));
}

TYPED_TEST_P(PrimitiveBehaviorTest, CancelledAcquireThatWonReleasesWhatItTook) {
  auto p = this->Make("r");
  int ran = 0;
  absl::StatusOr<AcquireHandle> h =
      p->lock().Acquire("r", this->Ttl(absl::Seconds(30)), [&](absl::StatusOr<Lease>) { ++ran; });
  ASSERT_THAT(h, IsOk());
  EXPECT_TRUE(h->Cancel());  // the command is already on its way
  this->env_->RunFor(absl::Milliseconds(500));
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(this->Held("r"));
  EXPECT_FALSE(h->Cancel());
}

// The document's stock deduction: 6 clients, stock 60, read-modify-write in
// separate round trips under the lock. Never two inside, sold out exactly.
TYPED_TEST_P(PrimitiveBehaviorTest, StockIsNeverOversoldByConcurrentClients) {
  if (!TypeParam::Kind::kExclusive) GTEST_SKIP() << "readers share: no mutual exclusion to test";
  constexpr int kClients = 6;
  constexpr int kStock = 60;
  std::vector<std::unique_ptr<PrimitiveInstance>> primitives;
  std::vector<StockSaleClient> sellers;
  for (int i = 0; i < kClients; ++i) {
    Transport* t = this->env_->NewClient();
    primitives.push_back(TypeParam::Kind::Make(this->loop(), t, this->FastRetry(), "stock"));
    sellers.push_back({t, &primitives.back()->lock()});
  }
  StockSale sale = RunStockSale(*this->env_, sellers, "stock",
                                this->Ttl(absl::Seconds(10), absl::Seconds(60)), kStock,
                                absl::Seconds(120));
  ASSERT_TRUE(sale.finished);
  EXPECT_EQ(sale.errors, 0);
  EXPECT_EQ(sale.max_in_critical, 1);
  EXPECT_EQ(sale.sold, kStock);
  EXPECT_EQ(this->Get("stock:p1"), Reply::String("0"));
  this->env_->RunFor(absl::Milliseconds(100));
  EXPECT_FALSE(this->Held("stock"));
}

REGISTER_TYPED_TEST_SUITE_P(PrimitiveBehaviorTest,
                            AcquireHoldsAndReleaseFrees,
                            SecondAcquireIsAbortedWhileHeld,
                            BlockerKeepsAnAcquireOutUntilItReleases,
                            ExpiredOwnersReleaseLeavesNewOwnersHoldIntact,
                            ExtendAfterExpiryFailsAndCreatesNothing,
                            ExtendSetsTheNewTtlNotASum,
                            BadArgumentsAreRejectedAndCallbackNeverRuns,
                            FencesStrictlyIncreaseAcrossOwnersAndFreshClients,
                            WaiterWakesSoonAfterRelease,
                            WaiterGivesUpWithDeadlineExceededAndLeavesNothing,
                            WaiterAcquiresAfterHolderExpiresWithoutNotification,
                            CancelDuringWaitLeavesNothingBehind,
                            CancelledAcquireThatWonReleasesWhatItTook,
                            StockIsNeverOversoldByConcurrentClients);

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_LOCK_PRIMITIVE_BEHAVIOR_SUITE_H_
