// RetryLock on FakeRedis in virtual time: backoff schedule, notification
// races, lost notifications, retried and final errors, cancellation and
// destruction with waits pending.
#include "dlock/lock/retry_lock.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/acquire_result.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::Pending;
using ::dlock::test_support::StartAcquire;
using ::dlock::test_support::StatusIs;

AcquireOptions Wait(absl::Duration ttl, absl::Duration wait) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

class RetryLockTest : public ::testing::Test {
 protected:
  RetryLockTest()
      : server_(&loop_),
        holder_conn_(&loop_, &server_),
        conn_(&loop_, &server_),
        holder_(&loop_, &holder_conn_),
        inner_(&loop_, &conn_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
  }

  Lease Hold(absl::string_view resource, absl::Duration ttl = absl::Seconds(60)) {
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    AcquireOptions o;
    o.ttl = ttl;
    EXPECT_THAT(holder_.Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = r; }), IsOk());
    loop_.RunUntilIdle();
    EXPECT_THAT(out, IsOk());
    return out.ok() ? *out : Lease();
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport holder_conn_;
  FakeTransport conn_;
  SimpleLock holder_;
  SimpleLock inner_;
  KeyScheme keys_;
};

TEST_F(RetryLockTest, BackoffGrowsExponentiallyToTheCapAndTheWaitEndsAtTheDeadline) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(10);
  o.max_backoff = absl::Milliseconds(80);
  std::vector<absl::Duration> caps;
  o.jitter = [&caps](absl::Duration cap) {
    caps.push_back(cap);
    return cap;
  };
  o.notifications = false;  // the backoff schedule alone
  RetryLock lock(&loop_, &inner_, o);
  Hold("r");
  const absl::Time start = loop_.Now();
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(1), absl::Milliseconds(500)));
  loop_.AdvanceTime(absl::Milliseconds(499));
  EXPECT_TRUE(Pending(r));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(loop_.Now() - start, absl::Milliseconds(500));
  // 10+20+40+80*4 = 390 ms, then the last gap is clipped to the deadline,
  // where the wait ends without another attempt.
  ASSERT_GE(caps.size(), 5u);
  EXPECT_EQ(caps[0], absl::Milliseconds(10));
  EXPECT_EQ(caps[1], absl::Milliseconds(20));
  EXPECT_EQ(caps[2], absl::Milliseconds(40));
  EXPECT_EQ(caps[3], absl::Milliseconds(80));
  EXPECT_EQ(caps.back(), absl::Milliseconds(80));
  EXPECT_EQ(lock.attempts(), static_cast<int64_t>(caps.size()));
}

// --wait against a frozen server: every command vanishes (only the
// per-command timeout answers). The callback still fires at start + wait,
// with the attempt in flight abandoned.
TEST_F(RetryLockTest, TheWaitIsAHardBoundAgainstAFrozenServer) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(50);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);  // inner_: 2 s per command
  conn_.DropNextRequests(1000);
  const absl::Time start = loop_.Now();
  absl::Time done_at;
  absl::StatusOr<Lease> got = absl::UnknownError("pending");
  ASSERT_THAT(lock.Acquire("r", Wait(absl::Seconds(10), absl::Seconds(3)),
                           [&](absl::StatusOr<Lease> l) {
                             got = std::move(l);
                             done_at = loop_.Now();
                           }),
              IsOk());
  // Attempt 1 times out at 2 s, attempt 2 goes out at 2.05 s and would be
  // answered at 4.05 s.
  loop_.AdvanceTime(absl::Seconds(10));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(done_at - start, absl::Seconds(3));
  EXPECT_NE(got.status().message().find("lock not acquired within the wait of 3s"),
            std::string::npos)
      << got.status();
  EXPECT_EQ(lock.attempts(), 2);
  EXPECT_EQ(lock.waiting(), 0u);
}

// The server is slow to answer, and the attempt in flight at the deadline
// was in fact granted: the caller hears kDeadlineExceeded at the deadline,
// and the late grant is released in the background (no lock left behind).
TEST_F(RetryLockTest, ALateGrantAfterTheDeadlineIsReleased) {
  // A trusted data set: the acquire's transaction is valid at once, one
  // round trip (no rare path: docs/fences.md).
  server_.Execute(TrustDataSetCommand(keys_));
  SimpleLockOptions so;
  so.command_timeout = absl::Seconds(30);
  SimpleLock slow_inner(&loop_, &conn_, so);
  RetryLock lock(&loop_, &slow_inner);
  conn_.SetLatency(absl::Milliseconds(100), absl::Seconds(5));  // replies lag
  const absl::Time start = loop_.Now();
  absl::Time done_at;
  absl::StatusOr<Lease> got = absl::UnknownError("pending");
  ASSERT_THAT(lock.Acquire("r", Wait(absl::Seconds(10), absl::Seconds(3)),
                           [&](absl::StatusOr<Lease> l) {
                             got = std::move(l);
                             done_at = loop_.Now();
                           }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));  // granted on the server
  loop_.AdvanceTime(absl::Milliseconds(2900));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(done_at - start, absl::Seconds(3));
  EXPECT_NE(got.status().message().find("in flight"), std::string::npos) << got.status();
  // The grant's reply comes at 5.1 s; its release is applied 100 ms later.
  loop_.AdvanceTime(absl::Milliseconds(2199));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  EXPECT_EQ(lock.attempts(), 1);
}

class WaitRecorder : public LockObserver {
 public:
  void OnAcquireWait(const AcquireWaitEvent& e) override { delays.push_back(e.next_attempt_in); }
  void OnAcquire(const AcquireEvent& e) override {
    if (e.policy == "retry") retry_outcomes.push_back(e.status.code());
  }
  std::vector<absl::Duration> delays;
  std::vector<absl::StatusCode> retry_outcomes;
};

TEST_F(RetryLockTest, DefaultJitterIsUniformWithinTheCap) {
  WaitRecorder rec;
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(100);
  o.max_backoff = absl::Milliseconds(100);
  o.observer = &rec;
  o.notifications = false;  // the backoff schedule alone
  RetryLock lock(&loop_, &inner_, o);
  Hold("r");
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(1), absl::Seconds(60)));
  loop_.AdvanceTime(absl::Seconds(5));
  ASSERT_GE(rec.delays.size(), 20u);  // mean 50 ms
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (absl::Duration d : rec.delays) {
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    EXPECT_GE(d, absl::ZeroDuration());
    EXPECT_LE(d, absl::Milliseconds(100));
  }
  EXPECT_LT(lo, absl::Milliseconds(40));
  EXPECT_GT(hi, absl::Milliseconds(60));
}

TEST_F(RetryLockTest, ReleaseBeforeTheSubscriptionIsConfirmedIsNotMissed) {
  RetryLockOptions o;
  o.initial_backoff = absl::Seconds(10);
  o.max_backoff = absl::Seconds(10);
  o.jitter = [](absl::Duration cap) { return cap; };
  conn_.SetSubscribeDelay(absl::Milliseconds(100));  // slow SUBSCRIBE
  RetryLock lock(&loop_, &inner_, o);
  Lease held = Hold("r");
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_EQ(lock.attempts(), 1);
  // Released while SUBSCRIBE is still on its way: no message reaches us.
  ASSERT_THAT(holder_.Release(held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_TRUE(Pending(r));
  // Once confirmed, the waiter tries again at once instead of sleeping 10 s.
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_THAT(*r, IsOk());
  EXPECT_EQ(lock.attempts(), 2);
}

TEST_F(RetryLockTest, LostNotificationFallsBackToTheBackoffTimer) {
  RetryLockOptions o;
  o.handoff_queue = false;  // asserts the broadcast wake-up (queue: handoff_test)
  o.initial_backoff = absl::Milliseconds(300);
  o.max_backoff = absl::Milliseconds(300);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  Hold("r");
  const absl::Time start = loop_.Now();
  absl::Time got_at;
  absl::StatusOr<Lease> got = absl::UnknownError("pending");
  ASSERT_THAT(lock.Acquire("r", Wait(absl::Seconds(5), absl::Seconds(30)),
                           [&](absl::StatusOr<Lease> l) {
                             got = std::move(l);
                             got_at = loop_.Now();
                           }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_EQ(lock.attempts(), 2);  // contention, then once subscribed
  // The holder vanishes without a release message (crash + expiry).
  server_.Execute({"DEL", keys_.LockKey("r")});
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsUnknown(got.status()));
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_THAT(got, IsOk());
  // The re-attempt after subscribing (t=0) failed; its timer fired at 300 ms.
  EXPECT_EQ(got_at - start, absl::Milliseconds(300));
  EXPECT_EQ(lock.attempts(), 3);
}

TEST_F(RetryLockTest, UnavailableAttemptsAreRetried) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(10);
  RetryLock lock(&loop_, &inner_, o);
  conn_.FailNext(2, absl::UnavailableError("connection reset"));
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(*r, IsOk());
  // Attempt 1 failed; SimpleLock's cleanup release of its token (unknown
  // outcome) took the second failure; attempt 2 succeeded. The cleanup was
  // retried and, comparing tokens, left attempt 2's key alone.
  EXPECT_EQ(lock.attempts(), 2);
  EXPECT_EQ(conn_.CountScriptRuns(ReleaseScript().sha1()), 2);
  EXPECT_EQ(server_.GetString(keys_.LockKey("r")), r->value().token);
}

TEST_F(RetryLockTest, NonRetryableErrorEndsTheWaitAtOnce) {
  RetryLock lock(&loop_, &inner_);
  conn_.FailNextWithReply(
      1, Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value"));
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(lock.attempts(), 1);
  EXPECT_EQ(lock.waiting(), 0u);
}

// An inner lock whose every attempt fails with a given status (answered on
// the next loop turn).
class FailingLock : public Lock {
 public:
  FailingLock(EventLoop* loop, absl::Status status) : loop_(loop), status_(status) {}
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view, const AcquireOptions&,
                                        LeaseCallback callback) override {
    auto cb = std::make_shared<LeaseCallback>(std::move(callback));
    loop_->RunAfter(absl::ZeroDuration(), [cb, s = status_] { std::move(*cb)(s); });
    return AcquireHandle();
  }
  absl::Status Release(const Lease&, StatusCallback) override {
    return absl::UnimplementedError("not used");
  }
  absl::Status Extend(const Lease&, absl::Duration, LeaseCallback) override {
    return absl::UnimplementedError("not used");
  }

 private:
  EventLoop* loop_;
  absl::Status status_;
};

TEST_F(RetryLockTest, OnlyBusyAndTransientErrorsAreRetried) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(10);
  o.jitter = [](absl::Duration cap) { return cap; };
  for (absl::StatusCode code :
       {absl::StatusCode::kPermissionDenied, absl::StatusCode::kInternal,
        absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
        absl::StatusCode::kUnauthenticated, absl::StatusCode::kResourceExhausted,
        absl::StatusCode::kCancelled}) {
    SCOPED_TRACE(absl::StatusCodeToString(code));
    FailingLock failing(&loop_, absl::Status(code, "permanent"));
    RetryLock lock(&loop_, &failing, o);
    auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
    loop_.AdvanceTime(absl::Seconds(1));
    EXPECT_THAT(*r, StatusIs(code));
    EXPECT_EQ(lock.attempts(), 1);
  }
  for (absl::StatusCode code : {absl::StatusCode::kAborted, absl::StatusCode::kUnavailable,
                                absl::StatusCode::kDeadlineExceeded}) {
    SCOPED_TRACE(absl::StatusCodeToString(code));
    FailingLock failing(&loop_, absl::Status(code, "transient"));
    RetryLock lock(&loop_, &failing, o);
    auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(1)));
    loop_.AdvanceTime(absl::Milliseconds(500));
    EXPECT_TRUE(Pending(r));
    EXPECT_GT(lock.attempts(), 3);
    loop_.AdvanceTime(absl::Milliseconds(500));
    EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  }
}

TEST_F(RetryLockTest, CancelWhileAnAttemptIsInFlightReleasesWhatItTook) {
  conn_.SetLatency(absl::Milliseconds(10));
  RetryLock lock(&loop_, &inner_);
  AcquireHandle handle;
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)), &handle);
  loop_.AdvanceTime(absl::Milliseconds(6));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));  // the attempt won
  EXPECT_TRUE(handle.Cancel());
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_TRUE(Pending(r));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  EXPECT_EQ(lock.waiting(), 0u);
}

TEST_F(RetryLockTest, DestroyingTheLockCancelsPendingWaits) {
  auto lock = std::make_unique<RetryLock>(&loop_, &inner_);
  Lease held = Hold("r");
  auto r1 = StartAcquire(*lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  auto r2 = StartAcquire(*lock, "other", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(*r2, IsOk());
  EXPECT_EQ(server_.SubscriberCount(keys_.ChannelKey("r")), 1u);
  lock.reset();
  loop_.RunUntilIdle();
  EXPECT_EQ(server_.SubscriberCount(keys_.ChannelKey("r")), 0u);
  ASSERT_THAT(holder_.Release(held, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(absl::Seconds(60));
  EXPECT_TRUE(Pending(r1));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

// Tasks of one process contending through one RetryLock: the releaser hands
// the lock to the oldest local waiter in the same write as its release.
TEST_F(RetryLockTest, ReleaseHandsOffToTheOldestLocalWaiterInTheSameWrite) {
  // A trusted data set: the acquire's transaction is valid at once, one
  // round trip (no rare path: docs/fences.md).
  server_.Execute(TrustDataSetCommand(keys_));
  const absl::Duration rtt = absl::Milliseconds(10);
  conn_.SetLatency(rtt);
  RetryLockOptions o;
  o.handoff_queue = false;  // asserts the broadcast wake-up (queue: handoff_test)
  o.initial_backoff = absl::Seconds(5);  // only a wake-up can explain progress
  o.max_backoff = absl::Seconds(5);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  auto a = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.AdvanceTime(rtt);
  ASSERT_THAT(*a, IsOk());
  auto b = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.AdvanceTime(3 * rtt);  // contention, subscription, re-attempt
  ASSERT_TRUE(Pending(b));
  ASSERT_EQ(lock.subscriptions(), 1u);
  const int64_t before = lock.attempts();

  // Scripts only (the release script's first run on the connection is
  // preceded by its SCRIPT LOAD: transport.h).
  const int64_t sent_before = conn_.CountSent("EVALSHA") + conn_.CountSent("EXEC");
  const absl::Time released_at = loop_.Now();
  ASSERT_THAT(lock.Release(**a, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  // The release and B's acquire (a MULTI/EXEC: docs/fences.md) were sent in
  // this very turn, in that order.
  ASSERT_EQ(conn_.CountSent("EVALSHA") + conn_.CountSent("EXEC"), sent_before + 2);
  EXPECT_EQ(lock.attempts(), before + 1);
  loop_.AdvanceTime(rtt);
  ASSERT_THAT(*b, IsOk()) << "one round trip after the release, not two";
  EXPECT_EQ(loop_.Now() - released_at, rtt);
  // The release's own notification wakes nobody else.
  loop_.AdvanceTime(10 * rtt);
  EXPECT_EQ(lock.attempts(), before + 1);
  ASSERT_THAT(lock.Release(**b, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(rtt);
}

TEST_F(RetryLockTest, NewWaitersQueueBehindLocalWaitersInArrivalOrderWithoutAttempting) {
  const absl::Duration rtt = absl::Milliseconds(10);
  conn_.SetLatency(rtt);
  RetryLockOptions o;
  o.handoff_queue = false;  // asserts the broadcast wake-up (queue: handoff_test)
  o.initial_backoff = absl::Seconds(5);
  o.max_backoff = absl::Seconds(5);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  Lease held = Hold("r");
  auto first = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.AdvanceTime(3 * rtt);
  ASSERT_EQ(lock.subscriptions(), 1u);
  const int64_t before = lock.attempts();
  auto second = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  auto third = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.AdvanceTime(3 * rtt);
  EXPECT_EQ(lock.attempts(), before) << "queued behind the first, no attempt";
  EXPECT_EQ(lock.waiting(), 3u);

  // Another process releases: the oldest wins, then each release hands on.
  ASSERT_THAT(holder_.Release(held, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(3 * rtt);
  ASSERT_THAT(*first, IsOk());
  EXPECT_TRUE(Pending(second));
  EXPECT_TRUE(Pending(third));
  ASSERT_THAT(lock.Release(**first, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(3 * rtt);
  ASSERT_THAT(*second, IsOk());
  EXPECT_TRUE(Pending(third));
  ASSERT_THAT(lock.Release(**second, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(3 * rtt);
  ASSERT_THAT(*third, IsOk());
  EXPECT_EQ(lock.attempts(), before + 3) << "one attempt per hand-over";
  ASSERT_THAT(lock.Release(**third, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(rtt);
  EXPECT_EQ(lock.subscriptions(), 0u);
}

// The race behind a lost turn: B's attempt is in flight when the holder A
// releases (so the hand-off cannot start a new one for B), the release
// channel's SUBSCRIBE is not confirmed yet, and C asks next. C must queue
// behind B, not attempt at once (its attempt would go out right behind the
// release and win ahead of B).
TEST_F(RetryLockTest, ANewWaiterNeverOvertakesAnOlderOneWhileTheSubscriptionIsPending) {
  // A trusted data set: the acquire's transaction is valid at once, one
  // round trip (no rare path: docs/fences.md).
  server_.Execute(TrustDataSetCommand(keys_));
  const absl::Duration rtt = absl::Milliseconds(10);
  conn_.SetLatency(rtt);
  conn_.SetSubscribeDelay(absl::Seconds(30));
  RetryLockOptions o;
  o.initial_backoff = absl::Seconds(100);  // only wake-ups move it on
  o.max_backoff = absl::Seconds(100);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  auto a = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.AdvanceTime(rtt);
  ASSERT_THAT(*a, IsOk());
  // In one turn: B asks (its attempt goes out), A releases (B's attempt is
  // in flight, so the hand-off cannot start another), C asks.
  auto b = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  ASSERT_THAT(lock.Release(**a, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  const int64_t before = lock.attempts();
  auto c = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  EXPECT_EQ(lock.attempts(), before) << "C queues behind B without an attempt";
  loop_.AdvanceTime(3 * rtt);
  ASSERT_THAT(*b, IsOk()) << "B asked first";
  EXPECT_TRUE(Pending(c));
  EXPECT_EQ(lock.subscriptions(), 1u);  // subscribing, not confirmed yet
  ASSERT_THAT(lock.Release(**b, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(3 * rtt);
  ASSERT_THAT(*c, IsOk());
  ASSERT_THAT(lock.Release(**c, [](absl::Status) {}), IsOk());
  loop_.AdvanceTime(rtt);
}

// Local arrival order does not depend on when the release channel's
// SUBSCRIBE is confirmed: 4 local tasks take 5 turns each (a critical
// section of one round trip, release, queue again), with the confirmation
// late by 0 to many round trips. Each turn goes to the next task in arrival
// order; once the channel is live, each hand-over costs one attempt.
TEST_F(RetryLockTest, LocalTurnsKeepArrivalOrderWhateverTheSubscriptionDelay) {
  const absl::Duration rtt = absl::Milliseconds(10);
  // Every arrival of the confirmation relative to the replies, in steps of
  // a tenth of a round trip, then much later.
  std::vector<absl::Duration> delays;
  for (int i = 0; i <= 80; ++i) delays.push_back(i * rtt / 10);
  delays.push_back(absl::Seconds(1));
  delays.push_back(absl::Seconds(10));
  for (absl::Duration delay : delays) {
    SCOPED_TRACE(absl::StrCat("subscribe delay ", absl::FormatDuration(delay)));
    // A fresh server, as in the real-server suite: no script is cached yet,
    // so the first run of each goes through the NOSCRIPT fallback.
    FakeRedis server(&loop_);
    FakeTransport conn(&loop_, &server);
    conn.SetLatency(rtt);
    conn.SetSubscribeDelay(delay);
    SimpleLock inner(&loop_, &conn);
    RetryLockOptions o;
    // Backoff timers never fire within this test: only releases move it on.
    o.initial_backoff = absl::Seconds(100);
    o.max_backoff = absl::Seconds(100);
    o.jitter = [](absl::Duration cap) { return cap; };
    RetryLock retry(&loop_, &inner, o);
    constexpr int kTasks = 4;
    constexpr int kRounds = 5;
    std::vector<int> holders;
    int done = 0;
    int errors = 0;
    std::function<void(int, int)> take = [&](int task, int left) {
      absl::StatusOr<AcquireHandle> h = retry.Acquire(
          "turns", Wait(absl::Seconds(10), absl::Seconds(60)),
          [&, task, left](absl::StatusOr<Lease> lease) {
            if (!lease.ok()) {
              ++errors;
              ++done;
              return;
            }
            holders.push_back(task);
            Lease l = *lease;
            ASSERT_THAT(conn.Send({"INCR", "turns:count"}, absl::Seconds(5),
                                  [&, task, left, l](absl::StatusOr<Reply>) {
                                    ASSERT_THAT(retry.Release(l, [&](absl::Status s) {
                                      if (!s.ok()) ++errors;
                                    }), IsOk());
                                    if (left > 1) {
                                      take(task, left - 1);
                                    } else {
                                      ++done;
                                    }
                                  }),
                        IsOk());
          });
      ASSERT_THAT(h, IsOk());
    };
    for (int i = 0; i < kTasks; ++i) take(i, kRounds);
    for (int step = 0; step < 400000 && done < kTasks; ++step) loop_.AdvanceTime(rtt / 10);
    loop_.AdvanceTime(rtt);
    EXPECT_EQ(done, kTasks);
    EXPECT_EQ(errors, 0);
    ASSERT_EQ(holders.size(), static_cast<size_t>(kTasks * kRounds));
    for (size_t i = 0; i < holders.size(); ++i) {
      EXPECT_EQ(holders[i], static_cast<int>(i % kTasks)) << "turn " << i;
    }
  }
}

TEST_F(RetryLockTest, AQueuedWaiterStillHasItsBackoffTimer) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(50);
  o.max_backoff = absl::Milliseconds(50);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  Hold("r", absl::Seconds(1));
  auto first = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.RunUntilIdle();
  auto second = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
  loop_.RunUntilIdle();
  // The holder's key expires (no notification): the first waiter's timer
  // finds the lock free.
  loop_.AdvanceTime(absl::Milliseconds(1050));
  ASSERT_THAT(*first, IsOk());
  EXPECT_TRUE(Pending(second));
  // The first's key vanishes without a release (no notification either):
  // the queued second waiter's own timer finds it free.
  server_.Execute({"DEL", keys_.LockKey("r")});
  loop_.AdvanceTime(absl::Milliseconds(50));
  EXPECT_THAT(*second, IsOk());
}

TEST_F(RetryLockTest, ObserverSeesWaitsAndOneOutcomePerAcquire) {
  WaitRecorder rec;
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(20);
  o.observer = &rec;
  RetryLock lock(&loop_, &inner_, o);
  Lease held = Hold("r", absl::Milliseconds(100));
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(*r, IsOk());
  EXPECT_FALSE(rec.delays.empty());
  EXPECT_EQ(rec.retry_outcomes, std::vector<absl::StatusCode>{absl::StatusCode::kOk});
}

// RetryLock learns the release channel and the transport to subscribe on
// from the lock it wraps (ReleaseNotifier): no key prefix in the options, no
// separate subscriber. With a non-default prefix and a long backoff, the
// release notification must wake the waiter at once.
TEST_F(RetryLockTest, LearnsTheReleaseChannelFromTheWrappedLock) {
  SimpleLockOptions custom;
  custom.key_prefix = "custom:";
  FakeTransport holder_conn(&loop_, &server_);
  FakeTransport conn(&loop_, &server_);
  SimpleLock holder(&loop_, &holder_conn, custom);
  SimpleLock inner(&loop_, &conn, custom);
  RetryLockOptions o;
  o.initial_backoff = absl::Seconds(10);
  o.max_backoff = absl::Seconds(10);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner, o);
  absl::StatusOr<Lease> held = absl::UnknownError("pending");
  ASSERT_THAT(holder.Acquire("r", Wait(absl::Seconds(60), absl::ZeroDuration()),
                             [&](absl::StatusOr<Lease> l) { held = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(held, IsOk());
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_TRUE(Pending(r));
  EXPECT_EQ(lock.subscriptions(), 1u);
  ASSERT_THAT(holder.Release(*held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*r, IsOk());
}

// notifications = false: although the wrapped lock announces its releases,
// a wait never subscribes and a foreign release wakes nobody (the backoff
// timer does); a release through this RetryLock still hands the lock to its
// oldest local waiter at once.
TEST_F(RetryLockTest, WithNotificationsOffAWaitNeverSubscribes) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(300);
  o.max_backoff = absl::Milliseconds(300);
  o.jitter = [](absl::Duration cap) { return cap; };
  o.notifications = false;
  RetryLock lock(&loop_, &inner_, o);
  ASSERT_NE(inner_.release_notifier(), nullptr);
  Lease held = Hold("r");
  auto first = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_EQ(lock.attempts(), 1);  // no second attempt after a subscription
  EXPECT_EQ(lock.subscriptions(), 0u);
  EXPECT_EQ(server_.SubscriberCount(keys_.ChannelKey("r")), 0u);
  // Another process releases: its notification reaches nobody here.
  ASSERT_THAT(holder_.Release(held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(Pending(first));
  EXPECT_EQ(lock.attempts(), 1);
  // The backoff timer (300 ms after the first attempt) finds it free.
  loop_.AdvanceTime(absl::Milliseconds(200));
  ASSERT_THAT(*first, IsOk());
  EXPECT_EQ(lock.attempts(), 2);

  // A second local waiter queues; releasing through `lock` hands over at once.
  auto second = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_TRUE(Pending(second));
  EXPECT_EQ(lock.attempts(), 3);
  EXPECT_EQ(lock.subscriptions(), 0u);
  ASSERT_THAT(lock.Release(**first, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(*second, IsOk());
  EXPECT_EQ(lock.attempts(), 4);
  EXPECT_EQ(server_.SubscriberCount(keys_.ChannelKey("r")), 0u);
}

// A wrapped lock that says nothing about its releases: RetryLock polls with
// backoff (and subscribes to nothing).
TEST_F(RetryLockTest, WithoutAReleaseNotifierItPollsWithBackoff) {
  class Opaque : public Lock {
   public:
    explicit Opaque(Lock* inner) : inner_(inner) {}
    absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                          const AcquireOptions& options,
                                          LeaseCallback callback) override {
      return inner_->Acquire(resource, options, std::move(callback));
    }
    absl::Status Release(const Lease& lease, StatusCallback callback) override {
      return inner_->Release(lease, std::move(callback));
    }
    absl::Status Extend(const Lease& lease, absl::Duration ttl,
                        LeaseCallback callback) override {
      return inner_->Extend(lease, ttl, std::move(callback));
    }

   private:
    Lock* inner_;
  };
  Opaque opaque(&inner_);
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(300);
  o.max_backoff = absl::Milliseconds(300);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &opaque, o);
  Lease held = Hold("r");
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(5), absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_EQ(lock.subscriptions(), 0u);
  ASSERT_THAT(holder_.Release(held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(Pending(r));
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_THAT(*r, IsOk());
  EXPECT_EQ(lock.attempts(), 2);
}

// wake_stagger: a notification arms the waiter's attempt after the stagger;
// a further release within it draws it again (the lock changed hands
// without this waiter); with no further release it attempts once.
TEST_F(RetryLockTest, WakeStaggerDelaysTheWakeUpAndANewReleaseDrawsItAgain) {
  RetryLockOptions o;
  o.wake_stagger = absl::Milliseconds(10);
  o.jitter = [](absl::Duration cap) { return cap; };
  RetryLock lock(&loop_, &inner_, o);
  Lease held = Hold("r");
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(1), absl::Seconds(10)));
  loop_.RunUntilIdle();  // failed, subscribed, failed again: backoff 100 ms
  const int64_t before = lock.attempts();
  ASSERT_THAT(holder_.Release(held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_EQ(lock.attempts(), before);  // not at once
  loop_.AdvanceTime(absl::Milliseconds(5));
  held = Hold("r");
  ASSERT_THAT(holder_.Release(held, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Milliseconds(9));  // the first draw would have fired
  EXPECT_EQ(lock.attempts(), before);
  EXPECT_TRUE(Pending(r));
  loop_.AdvanceTime(absl::Milliseconds(1));  // 10 ms after the second release
  EXPECT_EQ(lock.attempts(), before + 1);
  EXPECT_THAT(*r, IsOk());
}

TEST_F(RetryLockTest, NegativeWakeStaggerIsRejected) {
  RetryLockOptions o;
  o.wake_stagger = -absl::Milliseconds(1);
  RetryLock lock(&loop_, &inner_, o);
  EXPECT_THAT(lock.Acquire("r", Wait(absl::Seconds(1), absl::Seconds(1)),
                           [](absl::StatusOr<Lease>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The refusals' texts, whole (built by one ErrorStatus format each).
TEST_F(RetryLockTest, OptionRefusalsSayWhatWasGot) {
  struct Case {
    std::function<void(RetryLockOptions&)> set;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](RetryLockOptions& o) { o.initial_backoff = -absl::Milliseconds(1); },
       "RetryLockOptions.initial_backoff must be > 0 and finite (got -1ms)"},
      {[](RetryLockOptions& o) { o.max_backoff = absl::InfiniteDuration(); },
       "RetryLockOptions.max_backoff must be > 0 and finite (got inf)"},
      {[](RetryLockOptions& o) { o.max_backoff = absl::Milliseconds(10); },
       "RetryLockOptions.max_backoff (10ms) must not be less than initial_backoff (50ms)"},
      {[](RetryLockOptions& o) { o.backoff_multiplier = 0.5; },
       "RetryLockOptions.backoff_multiplier must be >= 1 and finite (got 0.5)"},
      {[](RetryLockOptions& o) { o.wake_stagger = -absl::Milliseconds(2); },
       "RetryLockOptions.wake_stagger must be >= 0 and finite (got -2ms)"},
  };
  for (const Case& c : cases) {
    RetryLockOptions o;
    c.set(o);
    RetryLock lock(&loop_, &inner_, o);
    EXPECT_THAT(lock.Acquire("r", Wait(absl::Seconds(1), absl::Seconds(1)),
                             [](absl::StatusOr<Lease>) {}),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message));
  }
}

// Every backoff option that would make a schedule without a pause (a zero
// initial backoff: re-attempts, or queue refreshes, in a loop) or with no
// sense (a cap below the start, a shrinking multiplier, infinities) is
// refused from the call with kInvalidArgument naming the field; the
// callback never runs and nothing is sent.
TEST_F(RetryLockTest, BackoffOptionsWithoutAPauseOrOutOfOrderAreRejected) {
  struct Case {
    const char* field;
    std::function<void(RetryLockOptions&)> set;
  };
  const std::vector<Case> cases = {
      {"initial_backoff", [](RetryLockOptions& o) { o.initial_backoff = absl::ZeroDuration(); }},
      {"initial_backoff",
       [](RetryLockOptions& o) { o.initial_backoff = -absl::Milliseconds(1); }},
      {"initial_backoff",
       [](RetryLockOptions& o) { o.initial_backoff = absl::InfiniteDuration(); }},
      {"max_backoff", [](RetryLockOptions& o) { o.max_backoff = absl::ZeroDuration(); }},
      {"max_backoff", [](RetryLockOptions& o) { o.max_backoff = absl::InfiniteDuration(); }},
      {"max_backoff", [](RetryLockOptions& o) { o.max_backoff = absl::Milliseconds(10); }},
      {"backoff_multiplier", [](RetryLockOptions& o) { o.backoff_multiplier = 0.5; }},
      {"backoff_multiplier", [](RetryLockOptions& o) { o.backoff_multiplier = -2; }},
      {"backoff_multiplier",
       [](RetryLockOptions& o) { o.backoff_multiplier = std::nan(""); }},
      {"wake_stagger",
       [](RetryLockOptions& o) { o.wake_stagger = absl::InfiniteDuration(); }},
  };
  for (const Case& c : cases) {
    RetryLockOptions o;
    c.set(o);
    RetryLock lock(&loop_, &inner_, o);
    bool ran = false;
    for (absl::Duration wait : {absl::ZeroDuration(), absl::Seconds(1)}) {
      absl::StatusOr<AcquireHandle> h = lock.Acquire(
          "r", Wait(absl::Seconds(1), wait), [&ran](absl::StatusOr<Lease>) { ran = true; });
      EXPECT_THAT(h, StatusIs(absl::StatusCode::kInvalidArgument)) << c.field;
      EXPECT_THAT(h.status().message(), ::testing::HasSubstr(c.field));
      EXPECT_THAT(lock.CheckAcquireArgs("r", Wait(absl::Seconds(1), wait)),
                  StatusIs(absl::StatusCode::kInvalidArgument));
    }
    loop_.RunUntilIdle();
    EXPECT_FALSE(ran) << c.field;
    EXPECT_EQ(lock.attempts(), 0) << c.field;
  }
  // The edges that stay accepted: a fixed schedule (max == initial,
  // multiplier 1) and no stagger.
  RetryLockOptions fixed;
  fixed.initial_backoff = absl::Milliseconds(1);
  fixed.max_backoff = absl::Milliseconds(1);
  fixed.backoff_multiplier = 1;
  RetryLock lock(&loop_, &inner_, fixed);
  auto r = StartAcquire(lock, "r", Wait(absl::Seconds(1), absl::Seconds(1)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, IsOk());
}

// A wait queued behind an older local waiter sends nothing when it is
// asked for, so the inner lock's Acquire cannot check its ttl from the
// call: RetryLock asks the inner lock's own check (CheckAcquireArgs), under
// the inner lock's drift options, not the default rule. Here the lock's
// drift (50% + 2 ms) makes 12 ms too short (7 ms allowance, 5 ms of
// validity needed), though the default rule (1% + 2 ms) accepts it: the
// call refuses it and its callback never runs (it used to queue, then fail
// on a later turn). The lease a queued wait is granted has the validity of
// the lock's own drift.
TEST_F(RetryLockTest, AQueuedWaitIsCheckedByTheInnerLocksOwnDrift) {
  SimpleLockOptions so;
  so.drift_factor = 0.5;
  SimpleLock drifting(&loop_, &conn_, so);
  const AcquireOptions too_short = Wait(absl::Milliseconds(12), absl::Seconds(1));
  ASSERT_TRUE(ValidateTtl(too_short.ttl).ok()) << "the default rule accepts it";
  ASSERT_THAT(drifting.CheckAcquireArgs("r", too_short),
              StatusIs(absl::StatusCode::kInvalidArgument));
  for (bool queue : {false, true}) {
    RetryLockOptions o;
    o.handoff_queue = queue;
    RetryLock lock(&loop_, &drifting, o);
    Lease held = Hold("r");
    auto first = StartAcquire(lock, "r", Wait(absl::Seconds(30), absl::Seconds(60)));
    loop_.RunUntilIdle();
    ASSERT_TRUE(Pending(first));
    bool ran = false;
    EXPECT_THAT(lock.Acquire("r", too_short, [&ran](absl::StatusOr<Lease>) { ran = true; }),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << "queue " << queue;
    const AcquireOptions ok = Wait(absl::Milliseconds(100), absl::Seconds(60));
    auto second = StartAcquire(lock, "r", ok);
    loop_.RunUntilIdle();
    ASSERT_TRUE(Pending(second));
    ASSERT_THAT(holder_.Release(held, [](absl::Status) {}), IsOk());
    loop_.RunUntilIdle();
    ASSERT_THAT(*first, IsOk());
    const absl::Time sent = loop_.Now();  // no latency: the attempt goes out now
    ASSERT_THAT(lock.Release(**first, [](absl::Status) {}), IsOk());
    loop_.RunUntilIdle();
    ASSERT_THAT(*second, IsOk());
    // 100 ms - (50 ms + 2 ms), from the send.
    EXPECT_EQ((*second)->deadline, sent + absl::Milliseconds(48));
    ASSERT_THAT(lock.Release(**second, [](absl::Status) {}), IsOk());
    loop_.AdvanceTime(absl::Seconds(5));
    EXPECT_FALSE(ran);
  }
}

}  // namespace
}  // namespace dlock
