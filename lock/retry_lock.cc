// RetryLock's wait: Acquire, attempts, backoff, the deadline, finishing and
// cancelling (see retry_lock.h). Wake-ups: retry_lock_wake.cc.
#include "dlock/lock/retry_lock.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

RetryLock::RetryLock(EventLoop* loop, Lock* inner, RetryLockOptions options)
    : loop_(loop),
      inner_(inner),
      notifier_(inner->release_notifier()),
      subscriber_(notifier_ != nullptr ? notifier_->ReleaseSubscriber() : nullptr),
      options_(std::move(options)),
      observer_(ObserverOrNoop(options_.observer)),
      keys_{options_.key_prefix},
      backoff_(options_.initial_backoff, options_.max_backoff,
               options_.backoff_multiplier, options_.jitter) {}

RetryLock::RetryLock(EventLoop* loop, Lock* inner, Transport* subscriber,
                     RetryLockOptions options)
    : loop_(loop),
      inner_(inner),
      notifier_(nullptr),
      subscriber_(subscriber),
      options_(std::move(options)),
      observer_(ObserverOrNoop(options_.observer)),
      keys_{options_.key_prefix},
      backoff_(options_.initial_backoff, options_.max_backoff,
               options_.backoff_multiplier, options_.jitter) {}

RetryLock::~RetryLock() {
  std::vector<Waiter*> all;
  all.reserve(waiters_.size());
  for (auto& [w, unused] : waiters_) all.push_back(w);
  for (Waiter* w : all) CancelWaiter(w);
  groups_.clear();
}

absl::StatusOr<AcquireHandle> RetryLock::Acquire(absl::string_view resource,
                                                 const AcquireOptions& options,
                                                 LeaseCallback callback) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = ValidateTtl(options.ttl);
  if (!s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  if (options_.wake_stagger < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wake_stagger must not be negative");
  }
  auto w = std::make_shared<Waiter>();
  w->lock = this;
  w->resource = std::string(resource);
  w->options = options;
  w->options.wait = absl::ZeroDuration();
  w->start = loop_->Now();
  w->deadline = w->start + options.wait;
  w->single = options.wait == absl::ZeroDuration();
  w->callback = std::move(callback);
  waiters_[w.get()] = w;
  // Join the resource's FIFO at once: order of Acquire calls.
  std::shared_ptr<Group>& g = groups_[w->resource];
  if (g == nullptr) {
    g = std::make_shared<Group>();
    g->resource = w->resource;
  }
  w->group = g;
  w->pos = g->fifo.insert(g->fifo.end(), w.get());
  if (!w->single) {
    // The wait's hard bound: whatever is in flight then, the caller hears
    // kDeadlineExceeded at the deadline (see OnDeadline).
    std::weak_ptr<Waiter> weak = w;
    w->deadline_timer = loop_->RunAfter(options.wait, [this, weak] {
      std::shared_ptr<Waiter> w = weak.lock();
      if (w == nullptr || w->state != Waiter::State::kPending) return;
      w->deadline_timer = 0;
      OnDeadline(w);
    });
  }

  size_t older = 0;  // older local waiters that wait (not one-shot TryLocks)
  for (Waiter* o : g->fifo) older += o != w.get() && !o->single;
  if (!w->single && older > 0) {
    // Older local waiters wait for this resource: queue behind them without
    // an attempt, whatever the state of the release channel (an attempt
    // could only fail, or barge ahead of them: e.g. go out right behind a
    // release whose hand-off found the oldest waiter's attempt in flight).
    // Local arrival order is known here, so it never depends on when the
    // SUBSCRIBE is confirmed. A release (local hand-off or notification)
    // wakes the oldest first; the backoff timer covers a lost notification.
    w->sleep_start = w->start;
    if (subscriber_ != nullptr) EnsureSubscribed(g);
    ScheduleBackoff(w, absl::AbortedError(absl::StrCat(
                           "queued behind ", older, " local waiter(s)")));
    return AcquireHandle(std::weak_ptr<Cancellable>(w));
  }

  w->attempts++;
  attempts_++;
  w->in_flight = true;
  w->sent_ready = g->ready;
  absl::StatusOr<AcquireHandle> h = inner_->Acquire(
      w->resource, w->options, [this, w](absl::StatusOr<Lease> r) mutable {
        OnAttemptResult(w, std::move(r));
      });
  if (!h.ok()) {
    // Rejected by the inner lock: the callback never runs.
    w->in_flight = false;
    w->state = Waiter::State::kDone;
    Detach(w.get());
    return h.status();
  }
  w->inner = *h;
  return AcquireHandle(std::weak_ptr<Cancellable>(w));
}

void RetryLock::StartAttempt(const std::shared_ptr<Waiter>& w) {
  if (w->timer != 0) {
    loop_->Cancel(w->timer);
    w->timer = 0;
  }
  w->waited += loop_->Now() - w->sleep_start;
  w->attempts++;
  attempts_++;
  w->in_flight = true;
  w->notified = false;
  w->pending_ready = false;
  w->sent_ready = w->group != nullptr && w->group->ready;
  absl::StatusOr<AcquireHandle> h = inner_->Acquire(
      w->resource, w->options, [this, w](absl::StatusOr<Lease> r) mutable {
        OnAttemptResult(w, std::move(r));
      });
  if (!h.ok()) {
    // Finish on a later turn: we may be inside a subscription callback,
    // where neither the user's callback nor dropping the group may run.
    w->in_flight = false;
    std::weak_ptr<Waiter> weak = w;
    w->timer = loop_->RunAfter(absl::ZeroDuration(), [this, weak, st = h.status()] {
      std::shared_ptr<Waiter> w = weak.lock();
      if (w == nullptr || w->state != Waiter::State::kPending) return;
      w->timer = 0;
      Finish(w, st);
    });
    return;
  }
  w->inner = *h;
}

void RetryLock::OnAttemptResult(const std::shared_ptr<Waiter>& w,
                                absl::StatusOr<Lease> result) {
  w->in_flight = false;
  w->inner = AcquireHandle();
  if (w->state != Waiter::State::kPending) {
    // Cancelled while this callback was already running: give it back.
    if (result.ok()) {
      (void)inner_->Release(*result, [](absl::Status) {});
    }
    return;
  }
  if (result.ok() || w->single) {
    Finish(w, std::move(result));
    return;
  }
  const absl::Status& error = result.status();
  if (!IsRetried(error)) {
    Finish(w, error);
    return;
  }
  w->last_error = error;
  const absl::Time now = loop_->Now();
  if (now >= w->deadline) {
    FinishAtDeadline(w, /*in_flight=*/false);
    return;
  }
  w->sleep_start = now;
  if (absl::IsAborted(error) && w->notified) {
    // Released while our attempt was in flight (a notification, or a local
    // hand-off that found it in flight): it may have lost the race to the
    // release itself. Whether or not the channel is live yet.
    StartAttempt(w);
    return;
  }
  if (absl::IsAborted(error) && subscriber_ != nullptr) {
    const std::shared_ptr<Group>& g = w->group;
    if (!w->sent_ready) {
      if (g->ready) {
        // Subscribed meanwhile: a release may have slipped in between.
        StartAttempt(w);
        return;
      }
      w->pending_ready = true;
      EnsureSubscribed(g);
    }
  }
  ScheduleBackoff(w, error);
}

void RetryLock::ScheduleBackoff(const std::shared_ptr<Waiter>& w,
                                const absl::Status& last_error) {
  absl::Duration delay = backoff_.Delay(w->attempts);
  const absl::Duration left = w->deadline - loop_->Now();
  delay = std::min(delay, left);
  // A wait ends at its deadline (the deadline timer) without one more
  // attempt there: an attempt sent then could not be answered in time.
  const bool last = delay >= left;

  AcquireWaitEvent event;
  event.policy = "retry";
  event.resource = w->resource;
  event.attempt = w->attempts;
  event.last_error = last_error;
  event.next_attempt_in = delay;
  event.wait_left = left;
  observer_->OnAcquireWait(event);

  if (w->last_error.ok()) w->last_error = last_error;
  if (last) return;
  std::weak_ptr<Waiter> weak = w;
  w->timer = loop_->RunAfter(delay, [this, weak] {
    std::shared_ptr<Waiter> w = weak.lock();
    if (w == nullptr || w->state != Waiter::State::kPending) return;
    w->timer = 0;
    StartAttempt(w);
  });
}

bool RetryLock::IsRetried(const absl::Status& error) {
  // Contention and transient failures (the inner lock already released
  // anything such an attempt may have taken). Everything else -- e.g.
  // kPermissionDenied, kInternal, kInvalidArgument, kFailedPrecondition --
  // ends the wait at once.
  return absl::IsAborted(error) || absl::IsUnavailable(error) ||
         absl::IsDeadlineExceeded(error);
}

void RetryLock::OnDeadline(const std::shared_ptr<Waiter>& w) {
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

void RetryLock::FinishAtDeadline(const std::shared_ptr<Waiter>& w, bool in_flight) {
  std::string message = absl::StrCat(
      "lock not acquired within the wait of ", absl::FormatDuration(w->deadline - w->start),
      " (", w->attempts, w->attempts == 1 ? " attempt" : " attempts", ")");
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

void RetryLock::Detach(Waiter* w) {
  if (w->timer != 0) {
    loop_->Cancel(w->timer);
    w->timer = 0;
  }
  if (w->deadline_timer != 0) {
    loop_->Cancel(w->deadline_timer);
    w->deadline_timer = 0;
  }
  std::shared_ptr<Group> g = std::move(w->group);
  if (g != nullptr) {
    g->fifo.erase(w->pos);
    if (g->fifo.empty()) groups_.erase(g->resource);  // drops the subscription
  }
  w->lock = nullptr;
  waiters_.erase(w);
}

void RetryLock::Finish(const std::shared_ptr<Waiter>& w,
                       absl::StatusOr<Lease> result) {
  w->state = Waiter::State::kDone;
  LeaseCallback cb = std::move(w->callback);
  AcquireEvent event;
  event.policy = "retry";
  event.resource = w->resource;
  event.status = result.status();
  event.latency = loop_->Now() - w->start;
  event.waited = w->waited;
  event.attempts = w->attempts;
  if (result.ok()) {
    event.fence = result->fence;
    event.ttl = result->ttl;
  }
  observer_->OnAcquire(event);
  Detach(w.get());
  // The user may destroy this RetryLock in the callback: touch nothing after.
  std::move(cb)(std::move(result));
}

bool RetryLock::CancelWaiter(Waiter* w) {
  if (w->state != Waiter::State::kPending) return false;
  w->state = Waiter::State::kCancelled;
  // Keep the waiter alive until we are done with it.
  std::shared_ptr<Waiter> keep = waiters_[w];
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

absl::Status RetryLock::Extend(const Lease& lease, absl::Duration ttl,
                               LeaseCallback callback) {
  return inner_->Extend(lease, ttl, std::move(callback));
}

}  // namespace dlock
