// This header defines `RetryLock`: a policy that wraps any `Lock` and waits
// for a busy resource up to `AcquireOptions::wait`, instead of failing at
// once. Each attempt is one `inner->Acquire()` (with wait 0).
//
// Waiting is event-driven, not blind polling:
//   - When an attempt meets contention (kAborted), RetryLock subscribes to
//     the resource's release channel, which it learns from the wrapped lock
//     (Lock::release_notifier(): the channel and the transport to subscribe
//     on; SimpleLock, ReentrantLock and the other policies publish on
//     KeyScheme::ChannelKey). A wrapped lock without a ReleaseNotifier (any
//     Lock of your own), or any lock with RetryLockOptions::notifications
//     off, is waited for by polling with the backoff below only. Once the
//     subscription is confirmed it attempts once more, so a release that
//     happened between the failed attempt and the subscription is not
//     missed.
//   - A release notification wakes ONE local waiter of that resource, the
//     oldest (FIFO); the others keep sleeping. With N waiters in this
//     process, each release costs about one attempt, not N (no stampede).
//     If that waiter's attempt was already in flight, it re-attempts at
//     once if that attempt fails.
//   - Local hand-off: a lease released through this RetryLock while local
//     waiters wait for its resource wakes the oldest of them at once, so
//     its acquire goes out in the same write as the release, right behind
//     it on the connection, instead of a round trip later when the
//     notification arrives; that notification (it carries the released
//     token) then wakes nobody else. Should the hand-off attempt still meet
//     the lock, it tries once more at once.
//   - An Acquire (wait > 0) that finds older local waiters (wait > 0) of
//     its resource queues behind them without an attempt (it could only
//     fail, or barge ahead of them), whether or not the release channel is
//     live yet: tasks of one process get the lock in the order they asked,
//     one attempt per hand-over once the channel is live. (TryLocks, wait
//     == 0, always make their one attempt.)
//   - Across processes (separate clients), over a lock with a hand-off
//     queue (SimpleLock; docs/handoff.md): a waiter refused by another
//     client's hold joins a queue on the server (one entry per RetryLock
//     and resource), and a release of a contended lock hands it to the
//     oldest live entry: only that client hears it (on its own channel)
//     and attempts, one attempt per hand-over; a client that met the
//     contention moments ago joins before its next attempt instead of
//     barging. A lost hand-off message is covered by the backoff timer,
//     which refreshes the entry (the queue then tells its head to attempt);
//     a waiter that died is skipped once its hand-off's grace (200 ms) or
//     its entry (max(2 s, 3 x max_backoff) after its last refresh) lapses;
//     one that gives up leaves the queue. A lock nobody waits for is
//     released with the plain release's work. The order is FIFO among
//     queued clients while messages arrive; not a guarantee as FairLock's
//     (a client unaware of the contention can take a free lock once).
//     With wake_stagger > 0, handoff_queue = false, or a lock without the
//     queue (RedLock),
//     waiters of other processes compete on equal
//     terms at each release instead (wake_stagger damps that stampede).
//   - A backoff timer still runs in case a notification is lost (or the
//     holder crashed and the key simply expired): capped exponential
//     backoff, initial_backoff * multiplier^(n-1) up to max_backoff, with
//     full jitter (uniform in [0, cap], absl::BitGen), never past the wait
//     deadline.
//   - The wait is a hard upper bound: at `start + wait` (give or take one
//     loop timer tick) the callback gets kDeadlineExceeded ("lock not
//     acquired within the wait of ..."), even with an attempt in flight
//     (e.g. a frozen server): that attempt is cancelled, i.e. left to
//     finish in the background, and the inner lock releases its token
//     should it turn out granted -- no lock is left behind. No attempt is
//     started at the deadline itself.
//   - One subscription per resource is shared by all waiters of this
//     RetryLock and dropped when the last of them finishes. Use one RetryLock
//     per process and resource space to get the FIFO behaviour across all
//     local waiters.
//
// Retried errors: only kAborted (busy), kUnavailable and kDeadlineExceeded
// (the inner lock already released anything such an attempt may have
// taken). Any other error (kPermissionDenied, kInternal, kInvalidArgument,
// kFailedPrecondition, ...) ends the wait at once with that error.
//
// Outcomes of Acquire: the Lease; with `wait == 0` exactly the inner lock's
// single result; when the wait deadline passes: kDeadlineExceeded at the
// deadline (message names the last failed attempt's error); a non-retried
// error as is.
//
// Cancel() on the handle: the callback never runs, the timer is cancelled,
// an attempt in flight is cancelled (the inner lock releases whatever it
// took), and the subscription is dropped if no other waiter needs it.
//
// Lifetime: `loop` and `inner` (and its subscriber transport) must outlive
// this object.
// Destroying the RetryLock cancels every pending wait as Cancel() would:
// their callbacks never run.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_RETRY_LOCK_H_
#define DLOCK_LOCK_RETRY_LOCK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

class RetryAttempts;
class RetryWakeups;

struct RetryLockOptions {
  // Whether waits subscribe to the wrapped lock's release notifications
  // (when it has a ReleaseNotifier). false: never subscribe; a wait polls
  // with the backoff schedule below only (a Release through this RetryLock
  // still hands off to the oldest local waiter at once). For a deployment
  // without pub/sub (a proxy that refuses SUBSCRIBE, an ACL user without
  // channel permission) or one that must not hold a subscription per
  // resource waited on.
  bool notifications = true;
  // Whether waits of separate clients queue on the server and a release
  // hands the lock to the oldest live one (the hand-off queue above, over
  // a lock that has one: SimpleLock; docs/handoff.md). false: every
  // notified client wakes and attempts at each release (wake_stagger
  // spreads them) -- e.g. on a Cluster whose slots migrate often (a
  // release of a contended lock names the queue keys, which a migrating
  // slot answers TRYAGAIN until it moves) or where no queue keys may be
  // written. No effect with notifications off.
  bool handoff_queue = true;
  // Backoff before attempt n+1: cap = min(max_backoff, initial_backoff *
  // backoff_multiplier^(n-1)), then jitter(cap). Checked at creation
  // (Acquire then returns kInvalidArgument naming the field): both
  // durations finite, initial_backoff > 0 (zero would re-attempt, or
  // refresh a queue entry, with no pause), max_backoff >= initial_backoff,
  // backoff_multiplier finite and >= 1.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  double backoff_multiplier = 2.0;
  // When > 0 (and then the cross-client hand-off queue is not used):
  // a release notification (not a local hand-off) wakes the
  // oldest local waiter after a delay jitter(wake_stagger) instead of at
  // once, and a further notification during that delay draws it again.
  // Waiters of separate processes woken by one release then seldom attempt
  // together, and while the lock changes hands faster than the stagger a
  // sleeping waiter does not attempt at all. Measured (bench/RESULTS.md, 4
  // separate clients, 1 ms): 4.0 -> 1.1 attempts per critical section,
  // slowest client 0.0 -> 0.67 of the mean share. Costs up to wake_stagger
  // of latency per wake-up; fairness stays statistical (FairLock for a
  // guarantee). Zero (the default): wake at once. Must be >= 0 and finite.
  absl::Duration wake_stagger = absl::ZeroDuration();
  // Picks the actual delay from the cap. Default (empty): full jitter,
  // uniform in [0, cap] from absl::BitGen. Tests may pin it.
  std::function<absl::Duration(absl::Duration cap)> jitter;
  // Receives OnAcquire (the whole wait, policy "retry") and OnAcquireWait.
  // nullptr: none.
  LockObserver* observer = nullptr;
};

class RetryLock : public Lock {
 public:
  // Waits on `inner`'s release notifications when it has a ReleaseNotifier
  // (channel and subscriber transport from it) and options.notifications
  // is set, else polls with backoff.
  RetryLock(EventLoop* loop, Lock* inner,
            RetryLockOptions options = RetryLockOptions());
  ~RetryLock() override;

  RetryLock(const RetryLock&) = delete;
  RetryLock& operator=(const RetryLock&) = delete;

  // Waits up to `options.wait` (see above). Returns kInvalidArgument for
  // invalid RetryLockOptions (the backoff fields above, a negative or
  // infinite wake_stagger: checked once, at creation) or a negative wait;
  // or the inner lock's rejection of the wait's arguments (its own resource
  // and ttl checks, under its own drift options: kInvalidArgument) -- from
  // its Acquire (the first attempt) or, for a wait queued without an attempt
  // now, from its CheckAcquireArgs. The callback then never runs.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;

  // The checks of Acquire above that need no attempt: the options', the
  // wait's, then the inner lock's CheckAcquireArgs.
  absl::Status CheckAcquireArgs(absl::string_view resource,
                                const AcquireOptions& options) const override;

  // Passed to the inner lock.
  absl::Status Release(const Lease& lease, StatusCallback callback) override;
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  // Observability for tests and tools.
  // Inner Acquire attempts made so far, over all waits.
  int64_t attempts() const;
  // Acquires still waiting (not finished or cancelled).
  size_t waiting() const;
  // Hand-off queue scripts sent so far (joins, refreshes, leaves; see
  // docs/handoff.md), over all waits.
  int64_t queue_calls() const;
  // Live release-channel subscriptions (one per resource being waited on).
  size_t subscriptions() const;
  // Of those, the ones the server has confirmed: releases reach them.
  size_t confirmed_subscriptions() const;

 private:
  EventLoop* const loop_;
  Lock* const inner_;
  const RetryLockOptions options_;
  // The verdict on options_ (backoff fields, wake_stagger), checked once at
  // creation.
  const absl::Status options_check_;
  // The wake-ups (retry_lock_internal.h) and the attempt loop, which
  // refers to them: destroyed in that order's reverse.
  std::unique_ptr<RetryWakeups> wakeups_;
  std::unique_ptr<RetryAttempts> attempts_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_RETRY_LOCK_H_
