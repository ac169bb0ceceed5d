// RetryAttempts: the attempt loop of a RetryLock's waiters -- attempts, the
// backoff schedule, the deadline, finishing and cancelling (see
// retry_lock.h and retry_lock_internal.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_reports.h"
#include "dlock/lock/retry_lock_internal.h"

namespace dlock {
namespace {

constexpr char kPolicy[] = "retry";

// Contention and transient failures (the inner lock already released
// anything such an attempt may have taken). Everything else -- e.g.
// kPermissionDenied, kInternal, kInvalidArgument, kFailedPrecondition --
// ends the wait at once.
bool IsRetried(const absl::Status& error) {
  return absl::IsAborted(error) || absl::IsUnavailable(error) ||
         absl::IsDeadlineExceeded(error);
}

}  // namespace

bool RetryWaiter::Cancel() { return owner != nullptr && owner->Cancel(this); }

RetryAttempts::RetryAttempts(EventLoop* loop, Lock* inner, const RetryLockOptions& options,
                             RetryWakeups* wakeups)
    : loop_(loop),
      inner_(inner),
      observer_(ObserverOrNoop(options.observer)),
      backoff_(options.initial_backoff, options.max_backoff, options.backoff_multiplier,
               options.jitter),
      wakeups_(wakeups) {}

void RetryAttempts::Add(const std::shared_ptr<RetryWaiter>& w) {
  w->owner = this;
  w->self = w;
  w->registered = waiters_.insert(waiters_.end(), w.get());
  if (w->single) return;
  // The wait's hard bound: whatever is in flight then, the caller hears
  // kDeadlineExceeded at the deadline (see OnDeadline).
  std::weak_ptr<RetryWaiter> weak = w;
  w->deadline_timer = loop_->RunAfter(w->deadline - w->start, [this, weak] {
    std::shared_ptr<RetryWaiter> w = weak.lock();
    if (w == nullptr || w->state != RetryWaiter::State::kPending) return;
    w->deadline_timer = 0;
    OnDeadline(w);
  });
}

absl::Status RetryAttempts::Send(const std::shared_ptr<RetryWaiter>& w) {
  w->attempts++;
  attempts_++;
  w->in_flight = true;
  w->sent_ready = w->group != nullptr && w->group->ready;
  absl::StatusOr<AcquireHandle> h = inner_->Acquire(
      w->resource, w->options,
      [this, w](absl::StatusOr<Lease> r) mutable { OnAttemptResult(w, std::move(r)); });
  if (!h.ok()) {
    w->in_flight = false;  // rejected by the inner lock: the callback never runs
    return h.status();
  }
  w->inner = *h;
  return absl::OkStatus();
}

absl::Status RetryAttempts::First(const std::shared_ptr<RetryWaiter>& w) {
  absl::Status s = Send(w);
  if (!s.ok()) {
    w->state = RetryWaiter::State::kDone;
    Detach(w.get());
  }
  return s;
}

void RetryAttempts::StartAttempt(const std::shared_ptr<RetryWaiter>& w) {
  if (w->timer != 0) {
    loop_->Cancel(w->timer);
    w->timer = 0;
  }
  w->waited += loop_->Now() - w->sleep_start;
  w->notified = false;
  w->pending_ready = false;
  absl::Status s = Send(w);
  if (s.ok()) return;
  // Finish on a later turn: we may be inside a subscription callback,
  // where neither the user's callback nor dropping the group may run.
  std::weak_ptr<RetryWaiter> weak = w;
  w->timer = loop_->RunAfter(absl::ZeroDuration(), [this, weak, s] {
    std::shared_ptr<RetryWaiter> w = weak.lock();
    if (w == nullptr || w->state != RetryWaiter::State::kPending) return;
    w->timer = 0;
    Finish(w, s);
  });
}

void RetryAttempts::OnAttemptResult(const std::shared_ptr<RetryWaiter>& w,
                                    absl::StatusOr<Lease> result) {
  w->in_flight = false;
  w->inner = AcquireHandle();
  if (w->state != RetryWaiter::State::kPending) {
    // Cancelled while this callback was already running: give it back.
    if (result.ok()) {
      (void)inner_->Release(*result, [](absl::Status) {});
    }
    return;
  }
  if (result.ok() || w->single) return Finish(w, std::move(result));
  const absl::Status& error = result.status();
  if (!IsRetried(error)) return Finish(w, error);
  w->last_error = error;
  const absl::Time now = loop_->Now();
  if (now >= w->deadline) return FinishAtDeadline(w, /*in_flight=*/false);
  w->sleep_start = now;
  if (absl::IsAborted(error) && w->notified) {
    // Released while our attempt was in flight (a notification, or a local
    // hand-off that found it in flight): it may have lost the race to the
    // release itself. Whether or not the channel is live yet.
    return StartAttempt(w);
  }
  if (absl::IsAborted(error) && wakeups_->enabled() && !w->sent_ready) {
    if (w->group->ready) {
      // Subscribed meanwhile: a release may have slipped in between.
      return StartAttempt(w);
    }
    w->pending_ready = true;
    wakeups_->EnsureSubscribed(w->group);
  }
  ScheduleBackoff(w, error);
  // Contended and subscribed: join the cross-client queue (or refresh the
  // entry); it answers "attempt now" if the lock went free meanwhile.
  if (absl::IsAborted(error) && w->timer != 0 && wakeups_->queue().enabled() &&
      w->group->ready) {
    w->group->contended = true;
    (void)wakeups_->queue().Join(w);
  }
}

void RetryAttempts::ScheduleBackoff(const std::shared_ptr<RetryWaiter>& w,
                                    const absl::Status& last_error) {
  const absl::Duration left = w->deadline - loop_->Now();
  const absl::Duration delay = std::min(backoff_.Delay(w->attempts), left);
  ReportAcquireWait(observer_, kPolicy, w->resource, w->attempts, last_error, delay, left);
  if (w->last_error.ok()) w->last_error = last_error;
  // A wait ends at its deadline (the deadline timer) without one more
  // attempt there: an attempt sent then could not be answered in time.
  if (delay >= left) return;
  std::weak_ptr<RetryWaiter> weak = w;
  w->timer = loop_->RunAfter(delay, [this, weak] {
    std::shared_ptr<RetryWaiter> w = weak.lock();
    if (w == nullptr || w->state != RetryWaiter::State::kPending) return;
    w->timer = 0;
    // Queued across clients: refresh the entry (the fallback for a lost
    // "w:<id>": the queue answers "attempt now" to its head), and sleep
    // again until the next refresh.
    if (wakeups_->queue().Join(w)) {
      w->waited += loop_->Now() - w->sleep_start;
      w->sleep_start = loop_->Now();
      ScheduleBackoff(w, w->last_error.ok() ? absl::AbortedError("queued") : w->last_error);
      return;
    }
    StartAttempt(w);
  });
}

void RetryAttempts::OnDeadline(const std::shared_ptr<RetryWaiter>& w) {
  bool in_flight = false;
  if (w->in_flight) {
    // Let the attempt finish in the background: its callback will not run,
    // and the inner lock releases the token should it turn out granted.
    // (False only if its callback is running, which it is not: we are in a
    // timer.)
    in_flight = w->inner.Cancel();
    w->in_flight = false;
    w->inner = AcquireHandle();
  }
  FinishAtDeadline(w, in_flight);
}

void RetryAttempts::FinishAtDeadline(const std::shared_ptr<RetryWaiter>& w, bool in_flight) {
  std::string message =
      absl::StrCat(WaitDeadlineMessage("lock", w->deadline - w->start, w->attempts), ")");
  if (in_flight) {
    absl::StrAppend(&message,
                    "; the attempt still in flight was abandoned (its token is "
                    "released should it have been granted)");
  }
  if (!w->last_error.ok()) {
    absl::StrAppend(&message, "; last attempt: ", w->last_error.ToString());
  }
  Finish(w, absl::DeadlineExceededError(message));
}

void RetryAttempts::Detach(RetryWaiter* w) {
  for (TimerId* t : {&w->timer, &w->deadline_timer}) {
    if (*t != 0) loop_->Cancel(*t);
    *t = 0;
  }
  wakeups_->Leave(w, w->acquired);
  w->owner = nullptr;
  if (w->self != nullptr) {
    waiters_.erase(w->registered);
    std::shared_ptr<RetryWaiter> last = std::move(w->self);  // `w` may die here
  }
}

void RetryAttempts::Finish(const std::shared_ptr<RetryWaiter>& w,
                           absl::StatusOr<Lease> result) {
  w->state = RetryWaiter::State::kDone;
  w->acquired = result.ok();
  LeaseCallback cb = std::move(w->callback);
  ReportAcquire(observer_, kPolicy, w->resource, result, loop_->Now() - w->start, w->waited,
                w->attempts);
  Detach(w.get());
  // The user may destroy the RetryLock in the callback: touch nothing after.
  std::move(cb)(std::move(result));
}

bool RetryAttempts::Cancel(RetryWaiter* w) {
  if (w->state != RetryWaiter::State::kPending) return false;
  w->state = RetryWaiter::State::kCancelled;
  // Keep the waiter alive until we are done with it.
  std::shared_ptr<RetryWaiter> keep = w->self;
  if (w->in_flight) {
    // True: the inner callback never runs and the inner lock gives back
    // anything it took. False: it is running right now (we are inside it),
    // and OnAttemptResult sees the cancelled state.
    w->inner.Cancel();
    w->in_flight = false;
  }
  LeaseCallback dropped = std::move(w->callback);
  (void)dropped;
  Detach(w);
  return true;
}

void RetryAttempts::CancelAll() {
  const std::vector<RetryWaiter*> all(waiters_.begin(), waiters_.end());
  for (RetryWaiter* w : all) Cancel(w);
}

}  // namespace dlock
