// Every single-server policy checks its own options, once, when it is
// created (LeaseCore), and refuses a bad one from the call -- before any
// command reaches the transport -- on every operation that uses it:
//   - a non-positive command_timeout: Acquire, Release and Extend of every
//     policy (it used to be checked by Semaphore alone; the others handed
//     it to the transport);
//   - an invalid replica_ack: Acquire and Extend of every policy that takes
//     one, the read-write views' Extend included (it used to be skipped
//     there).
// RetryLock checks its own options (wake_stagger) once, at creation, and
// leaves the resource and ttl to the lock it wraps, whose Acquire answers
// from the call; only a wait queued behind older local waiters (no attempt
// now) has its ttl checked by RetryLock itself.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

// Forwards to a FakeTransport and counts what reaches it.
class CountingTransport : public Transport {
 public:
  explicit CountingTransport(Transport* inner) : inner_(inner) {}

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override {
    ++commands_;
    return inner_->Send(std::move(argv), timeout, std::move(callback));
  }
  absl::Status SendArgv(absl::Span<const absl::string_view> argv, absl::Duration timeout,
                        ReplyCallback callback) override {
    ++commands_;
    return inner_->SendArgv(argv, timeout, std::move(callback));
  }
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override {
    ++commands_;
    return inner_->SendScript(body, evalsha_argv, timeout, std::move(callback));
  }
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override {
    return inner_->Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
  }

  int commands() const { return commands_; }

 private:
  Transport* inner_;
  int commands_ = 0;
};

class PolicyOptionsTest : public ::testing::Test {
 protected:
  PolicyOptionsTest() : server_(&loop_), fake_(&loop_, &server_), conn_(&fake_) {}

  static AcquireOptions Ttl() {
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    return o;
  }
  static Lease SomeLease() {
    Lease lease;
    lease.resource = "r";
    lease.token = "t";
    lease.ttl = absl::Seconds(10);
    return lease;
  }

  // Acquire, Release and Extend of `lock` are all refused with
  // kInvalidArgument (Release only when `release_too`), and nothing is sent.
  void ExpectRefused(Lock& lock, bool release_too) {
    const int before = conn_.commands();
    int callbacks = 0;
    EXPECT_THAT(lock.Acquire("r", Ttl(), [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(lock.Extend(SomeLease(), absl::Seconds(10),
                            [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
    if (release_too) {
      EXPECT_THAT(lock.Release(SomeLease(), [&](absl::Status) { ++callbacks; }),
                  StatusIs(absl::StatusCode::kInvalidArgument));
    }
    loop_.RunUntilIdle();
    loop_.AdvanceTime(absl::Seconds(5));
    EXPECT_EQ(conn_.commands(), before) << "a command reached the transport";
    EXPECT_EQ(callbacks, 0);
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport fake_;
  CountingTransport conn_;
};

TEST_F(PolicyOptionsTest, EveryPolicyRefusesANonPositiveCommandTimeoutItself) {
  for (absl::Duration timeout : {absl::ZeroDuration(), absl::Milliseconds(-1)}) {
    SCOPED_TRACE(absl::FormatDuration(timeout));
    SimpleLockOptions simple;
    simple.command_timeout = timeout;
    SimpleLock simple_lock(&loop_, &conn_, simple);
    ExpectRefused(simple_lock, true);

    ReentrantLockOptions reentrant;
    reentrant.command_timeout = timeout;
    ReentrantLock reentrant_lock(&loop_, &conn_, reentrant);
    ExpectRefused(reentrant_lock, true);

    SemaphoreOptions semaphore;
    semaphore.command_timeout = timeout;
    Semaphore sem(&loop_, &conn_, semaphore);
    ExpectRefused(sem, true);

    ReadWriteLockOptions rw;
    rw.command_timeout = timeout;
    ReadWriteLock rw_lock(&loop_, &conn_, rw);
    ExpectRefused(rw_lock.reader(), true);
    ExpectRefused(rw_lock.writer(), true);

    FairLockOptions fair;
    fair.command_timeout = timeout;
    FairLock fair_lock(&loop_, &conn_, fair);
    ExpectRefused(fair_lock, true);
  }
}

TEST_F(PolicyOptionsTest, ReadWriteViewsRefuseAnInvalidReplicaAckOnExtendAsOnAcquire) {
  ReadWriteLockOptions negative;
  negative.replica_ack.min_replicas = -1;
  ReadWriteLock a(&loop_, &conn_, negative);
  ExpectRefused(a.reader(), false);
  ExpectRefused(a.writer(), false);

  ReadWriteLockOptions no_timeout;
  no_timeout.replica_ack.min_replicas = 1;
  no_timeout.replica_ack.timeout = absl::ZeroDuration();
  ReadWriteLock b(&loop_, &conn_, no_timeout);
  ExpectRefused(b.reader(), false);
  ExpectRefused(b.writer(), false);
}

TEST_F(PolicyOptionsTest, EveryPolicyWithReplicaAckRefusesAnInvalidOneOnAcquireAndExtend) {
  ReplicaAckOptions bad;
  bad.min_replicas = -1;
  SimpleLockOptions simple;
  simple.replica_ack = bad;
  SimpleLock simple_lock(&loop_, &conn_, simple);
  ExpectRefused(simple_lock, false);
  ReentrantLockOptions reentrant;
  reentrant.replica_ack = bad;
  ReentrantLock reentrant_lock(&loop_, &conn_, reentrant);
  ExpectRefused(reentrant_lock, false);
}

TEST_F(PolicyOptionsTest, ValidOptionsStillSendAndAnInvalidAckLeavesReleaseAlone) {
  // The checks refuse only what the options make impossible: a release of
  // a policy whose replica_ack is invalid still goes out (releases never
  // wait for replicas), as does everything of a policy with good options.
  ReadWriteLockOptions bad_ack;
  bad_ack.replica_ack.min_replicas = -1;
  ReadWriteLock rw(&loop_, &conn_, bad_ack);
  absl::Status released = absl::UnknownError("pending");
  EXPECT_THAT(rw.reader().Release(SomeLease(), [&](absl::Status s) { released = s; }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));

  SimpleLock good(&loop_, &conn_);
  const int before = conn_.commands();
  absl::StatusOr<Lease> lease = absl::UnknownError("pending");
  EXPECT_THAT(good.Acquire("r", Ttl(), [&](absl::StatusOr<Lease> l) { lease = l; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_GT(conn_.commands(), before);
}

TEST_F(PolicyOptionsTest, RetryLockRefusesAnInvalidWakeStaggerFromEveryAcquire) {
  SimpleLock inner(&loop_, &conn_);
  RetryLockOptions o;
  o.wake_stagger = -absl::Milliseconds(1);
  RetryLock lock(&loop_, &inner, o);
  int callbacks = 0;
  for (absl::Duration wait : {absl::ZeroDuration(), absl::Seconds(1)}) {
    AcquireOptions a = Ttl();
    a.wait = wait;
    EXPECT_THAT(lock.Acquire("r", a, [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(conn_.commands(), 0);
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(lock.waiting(), 0u);
}

TEST_F(PolicyOptionsTest, RetryLockRefusesWhatItsInnerLockRefusesFromTheCall) {
  // The inner lock's own rule, not a copy of it: with a 1 s drift constant
  // a 500 ms lease keeps no validity, although the default rule takes it.
  SimpleLockOptions drifty;
  drifty.drift_constant = absl::Seconds(1);
  SimpleLock inner(&loop_, &conn_, drifty);
  RetryLock lock(&loop_, &inner);
  AcquireOptions short_ttl = Ttl();
  short_ttl.ttl = absl::Milliseconds(500);
  AcquireOptions tiny_ttl = Ttl();
  tiny_ttl.ttl = absl::Milliseconds(1);
  int callbacks = 0;
  for (absl::Duration wait : {absl::ZeroDuration(), absl::Seconds(1)}) {
    SCOPED_TRACE(absl::FormatDuration(wait));
    short_ttl.wait = tiny_ttl.wait = wait;
    AcquireOptions good = Ttl();
    good.wait = wait;
    EXPECT_THAT(lock.Acquire("", good, [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(lock.Acquire("r", short_ttl, [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(lock.Acquire("r", tiny_ttl, [&](absl::StatusOr<Lease>) { ++callbacks; }),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(conn_.commands(), 0) << "a command reached the transport";
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(lock.waiting(), 0u);
  EXPECT_EQ(lock.subscriptions(), 0u);
}

TEST_F(PolicyOptionsTest, RetryLockRefusesABadTtlOfAWaitQueuedBehindOthersFromTheCall) {
  // A wait behind an older local waiter is queued without an attempt, so
  // the inner lock never sees it in the call: RetryLock checks its ttl.
  SimpleLock holder(&loop_, &conn_);
  SimpleLock inner(&loop_, &conn_);
  RetryLock lock(&loop_, &inner);
  Lease held;
  ASSERT_THAT(holder.Acquire("r", Ttl(), [&](absl::StatusOr<Lease> l) { held = *l; }), IsOk());
  loop_.RunUntilIdle();
  ASSERT_FALSE(held.token.empty());
  AcquireOptions wait = Ttl();
  wait.wait = absl::Seconds(30);
  absl::StatusOr<Lease> first = absl::UnknownError("pending");
  ASSERT_THAT(lock.Acquire("r", wait, [&](absl::StatusOr<Lease> l) { first = l; }), IsOk());
  loop_.RunUntilIdle();
  ASSERT_EQ(lock.waiting(), 1u);

  AcquireOptions bad = wait;
  bad.ttl = absl::Milliseconds(1);
  int callbacks = 0;
  EXPECT_THAT(lock.Acquire("r", bad, [&](absl::StatusOr<Lease>) { ++callbacks; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(lock.waiting(), 1u);
  // The older wait is untouched and still gets the lock.
  ASSERT_THAT(holder.Release(held, [](absl::Status) {}), IsOk());
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_THAT(first, IsOk());
  EXPECT_EQ(callbacks, 0);
  EXPECT_EQ(lock.waiting(), 0u);
}

}  // namespace
}  // namespace dlock
