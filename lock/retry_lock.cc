// RetryLock, the facade (see retry_lock.h): checks an Acquire and places it
// in its resource's FIFO; the attempt loop is RetryAttempts
// (retry_attempts.cc), the wake-ups RetryWakeups (retry_lock_wake.cc) with
// their cross-client hand-off queue RetryHandOffQueue (retry_handoff_queue.cc).
#include "dlock/lock/retry_lock.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "dlock/lock/error_text.h"
#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

namespace {

// Where waits subscribe: the wrapped lock's ReleaseNotifier, unless it has
// none or the options turn notifications off (then nullptr: backoff only).
const ReleaseNotifier* NotifierOf(const Lock* inner, const RetryLockOptions& options) {
  return options.notifications ? inner->release_notifier() : nullptr;
}

// Whether a wait may be queued without an attempt (which would have the
// inner lock check its arguments from the call): the inner lock's own check
// of them passes, or, for a lock that has none, the common ttl rule does.
bool QueueableArgs(const Lock& inner, absl::string_view resource,
                   const AcquireOptions& options) {
  absl::Status s = inner.CheckAcquireArgs(resource, options);
  if (absl::IsUnimplemented(s)) s = ValidateTtl(options.ttl);
  return s.ok();
}

// A duration option that must be finite and above (or, `or_zero`, at
// least) zero: kInvalidArgument naming it otherwise.
absl::Status CheckDuration(absl::string_view field, absl::Duration d, bool or_zero) {
  const bool ok = d != absl::InfiniteDuration() &&
                  (or_zero ? d >= absl::ZeroDuration() : d > absl::ZeroDuration());
  if (ok) return absl::OkStatus();
  return ErrorStatus(absl::StatusCode::kInvalidArgument,
                     "RetryLockOptions.% must be % and finite (got %)",
                     {field, or_zero ? ">= 0" : "> 0", d});
}

// The options' one check, at creation (Acquire returns its verdict). A zero
// initial_backoff would re-attempt (or, queued, refresh) in a loop with no
// pause; a max_backoff below it, or a multiplier below 1, is a typo rather
// than a schedule.
absl::Status CheckOptions(const RetryLockOptions& o) {
  if (absl::Status s = CheckDuration("initial_backoff", o.initial_backoff, false); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDuration("max_backoff", o.max_backoff, false); !s.ok()) return s;
  if (o.max_backoff < o.initial_backoff) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "RetryLockOptions.max_backoff (%) must not be less than "
                       "initial_backoff (%)",
                       {o.max_backoff, o.initial_backoff});
  }
  if (!std::isfinite(o.backoff_multiplier) || o.backoff_multiplier < 1.0) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "RetryLockOptions.backoff_multiplier must be >= 1 and finite (got %)",
                       {o.backoff_multiplier});
  }
  return CheckDuration("wake_stagger", o.wake_stagger, true);
}

}  // namespace

RetryLock::RetryLock(EventLoop* loop, Lock* inner, RetryLockOptions options)
    : loop_(loop),
      inner_(inner),
      options_(std::move(options)),
      // The options' one check, here at creation (Acquire returns it).
      options_check_(CheckOptions(options_)),
      wakeups_(std::make_unique<RetryWakeups>(loop, NotifierOf(inner, options_),
                                              options_.handoff_queue, options_.wake_stagger,
                                              // A queue entry outlives the
                                              // longest sleep between refreshes.
                                              std::max(absl::Seconds(2),
                                                       3 * options_.max_backoff))),
      attempts_(std::make_unique<RetryAttempts>(loop, inner, options_, wakeups_.get())) {
  wakeups_->set_attempts(attempts_.get());
}

RetryLock::~RetryLock() {
  // Every pending wait ends as by Cancel() (their callbacks never run); the
  // last waiter of each resource drops its subscription.
  attempts_->CancelAll();
}

int64_t RetryLock::attempts() const { return attempts_->attempts(); }
size_t RetryLock::waiting() const { return attempts_->waiting(); }
int64_t RetryLock::queue_calls() const { return wakeups_->queue().queue_calls(); }
size_t RetryLock::subscriptions() const { return wakeups_->subscriptions(); }
size_t RetryLock::confirmed_subscriptions() const {
  return wakeups_->confirmed_subscriptions();
}

absl::StatusOr<AcquireHandle> RetryLock::Acquire(absl::string_view resource,
                                                 const AcquireOptions& options,
                                                 LeaseCallback callback) {
  // The resource and ttl are the inner lock's to check: its Acquire (the
  // first attempt, First below) answers from this call. Only a wait queued
  // behind older local waiters sends nothing now (see there).
  if (!options_check_.ok()) return options_check_;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  auto w = std::make_shared<RetryWaiter>();
  w->resource = std::string(resource);
  w->options = options;
  w->options.wait = absl::ZeroDuration();
  w->start = loop_->Now();
  w->deadline = w->start + options.wait;
  w->single = options.wait == absl::ZeroDuration();
  w->callback = std::move(callback);
  attempts_->Add(w);
  // Join the resource's FIFO at once: order of Acquire calls.
  const size_t older = wakeups_->Join(w.get());
  // A queued wait sends nothing now, so the inner lock's Acquire cannot
  // check it from this call: its CheckAcquireArgs does (the ttl under the
  // lock's own drift options), or, for a lock that does not say, the rule
  // every policy shares (ValidateTtl). One refused goes to the inner lock
  // at once after all, whose Acquire refuses it from this call.
  const bool may_queue = !w->single && QueueableArgs(*inner_, resource, options);
  if (may_queue && older > 0) {
    // Older local waiters wait for this resource: queue behind them without
    // an attempt, whatever the state of the release channel (an attempt
    // could only fail, or barge ahead of them: e.g. go out right behind a
    // release whose hand-off found the oldest waiter's attempt in flight).
    // Local arrival order is known here, so it never depends on when the
    // SUBSCRIBE is confirmed. A release (local hand-off or notification)
    // wakes the oldest first; the backoff timer covers a lost notification.
    w->sleep_start = w->start;
    if (wakeups_->enabled()) wakeups_->EnsureSubscribed(w->group);
    attempts_->ScheduleBackoff(
        w, ErrorStatus(absl::StatusCode::kAborted, "queued behind % local waiter(s)", {older}));
  } else if (may_queue && older == 0 && wakeups_->queue().JoinFirst(*w)) {
    // Another client waited for this resource moments ago (the group
    // lingers, subscribed): join the cross-client queue before attempting,
    // so as not to barge in on the waiter a release just handed the lock
    // to. The queue answers "attempt now" when the lock is free and nobody
    // live is queued ahead (one round trip more, on a resource recently
    // contended only).
    w->sleep_start = w->start;
    attempts_->ScheduleBackoff(w, absl::AbortedError("joined the hand-off queue"));
    // Already queued (our last release kept the entry at the tail): wait
    // for the hand-off; the backoff timer refreshes the entry.
    // (Then, or once queued, nothing more to do now.)
    if (w->group->in_queue && w->group->ready) {
    } else if (wakeups_->queue().Join(w)) {
    } else if (!w->group->ready) {
      // Subscribing still (a release just told us of the contention): join
      // once the subscription is confirmed.
      w->pending_ready = true;
      wakeups_->EnsureSubscribed(w->group);
    } else {
      attempts_->StartAttempt(w);
    }
  } else if (absl::Status s = attempts_->First(w); !s.ok()) {
    return s;
  }
  // One exit for every accepted wait (the handle built once).
  return AcquireHandle(std::weak_ptr<Cancellable>(w));
}

absl::Status RetryLock::CheckAcquireArgs(absl::string_view resource,
                                         const AcquireOptions& options) const {
  if (!options_check_.ok()) return options_check_;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  return inner_->CheckAcquireArgs(resource, options);
}

absl::Status RetryLock::Release(const Lease& lease, StatusCallback callback) {
  return wakeups_->Release(inner_, lease, std::move(callback));
}

absl::Status RetryLock::Extend(const Lease& lease, absl::Duration ttl,
                               LeaseCallback callback) {
  return inner_->Extend(lease, ttl, std::move(callback));
}

}  // namespace dlock
