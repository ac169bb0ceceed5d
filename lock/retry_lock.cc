// RetryLock, the facade (see retry_lock.h): checks an Acquire and places it
// in its resource's FIFO; the attempt loop is RetryAttempts
// (retry_attempts.cc), the wake-ups RetryWakeups (retry_lock_wake.cc) with
// their cross-client hand-off queue RetryHandOffQueue (retry_handoff_queue.cc).
#include "dlock/lock/retry_lock.h"

#include <algorithm>
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

}  // namespace

RetryLock::RetryLock(EventLoop* loop, Lock* inner, RetryLockOptions options)
    : loop_(loop),
      inner_(inner),
      options_(std::move(options)),
      // The options' one check, here at creation (Acquire returns it).
      options_check_(options_.wake_stagger < absl::ZeroDuration()
                         ? absl::InvalidArgumentError("wake_stagger must not be negative")
                         : absl::OkStatus()),
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
  // A queued wait sends nothing now, so the inner lock cannot check it from
  // this call: its resource is that of the older waiters (checked by the
  // inner lock at their first attempt); its ttl is checked here by the rule
  // every policy shares (ValidateTtl), and one that rule refuses goes to the
  // inner lock at once after all, whose check refuses it from this call.
  if (!w->single && older > 0 && ValidateTtl(options.ttl).ok()) {
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
    return AcquireHandle(std::weak_ptr<Cancellable>(w));
  }
  if (older == 0 && wakeups_->queue().JoinFirst(*w) && ValidateTtl(options.ttl).ok()) {
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
    if (w->group->in_queue && w->group->ready) {
      return AcquireHandle(std::weak_ptr<Cancellable>(w));
    }
    if (wakeups_->queue().Join(w)) return AcquireHandle(std::weak_ptr<Cancellable>(w));
    if (!w->group->ready) {
      // Subscribing still (a release just told us of the contention): join
      // once the subscription is confirmed.
      w->pending_ready = true;
      wakeups_->EnsureSubscribed(w->group);
      return AcquireHandle(std::weak_ptr<Cancellable>(w));
    }
    attempts_->StartAttempt(w);
    return AcquireHandle(std::weak_ptr<Cancellable>(w));
  }
  absl::Status s = attempts_->First(w);
  if (!s.ok()) return s;
  return AcquireHandle(std::weak_ptr<Cancellable>(w));
}

absl::Status RetryLock::Release(const Lease& lease, StatusCallback callback) {
  return wakeups_->Release(inner_, lease, std::move(callback));
}

absl::Status RetryLock::Extend(const Lease& lease, absl::Duration ttl,
                               LeaseCallback callback) {
  return inner_->Extend(lease, ttl, std::move(callback));
}

}  // namespace dlock
