// RetryWakeups: the release-channel subscription of each resource being
// waited on, and the notification that wakes one local waiter (see
// retry_lock.h and retry_lock_internal.h). The attempt loop:
// retry_attempts.cc; the cross-client hand-off queue:
// retry_handoff_queue.cc; a Release and its hand-off: retry_release.cc.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

RetryWakeups::RetryWakeups(EventLoop* loop, const ReleaseNotifier* notifier,
                           bool handoff_queue, absl::Duration wake_stagger,
                           absl::Duration entry_ttl)
    : loop_(loop),
      notifier_(notifier),
      subscriber_(notifier != nullptr ? notifier->ReleaseSubscriber() : nullptr),
      wake_stagger_(wake_stagger),
      queue_(this, notifier, handoff_queue, entry_ttl) {}

RetryWakeups::~RetryWakeups() {
  for (auto& [unused, g] : groups_) {
    if (g->linger_timer != 0) loop_->Cancel(g->linger_timer);
    g->linger_timer = 0;
    // Our queue entry (kept by a release, or a join still in flight: the
    // leave goes out behind it on the same connection) would otherwise stay
    // until it expires, and a release would hand the lock to it. Fire and
    // forget: its reply is dropped (the queue's guard), nothing calls back.
    if ((g->in_queue || g->joining) && queue_.enabled()) queue_.Leave(g);
  }
}

size_t RetryWakeups::subscriptions() const {
  size_t n = 0;
  for (const auto& [unused, g] : groups_) n += g->subscription != nullptr;
  return n;
}

size_t RetryWakeups::confirmed_subscriptions() const {
  size_t n = 0;
  for (const auto& [unused, g] : groups_) n += g->subscription != nullptr && g->ready;
  return n;
}

std::string RetryWakeups::ChannelOf(absl::string_view resource) const {
  return notifier_->ReleaseChannel(resource);  // enabled(): notifier_ is set
}

std::shared_ptr<RetryGroup>& RetryWakeups::GroupOf(const std::string& resource) {
  std::shared_ptr<RetryGroup>& g = groups_[resource];
  if (g == nullptr) {
    g = std::make_shared<RetryGroup>();
    g->resource = resource;
  }
  return g;
}

size_t RetryWakeups::Join(RetryWaiter* w) {
  std::shared_ptr<RetryGroup>& g = GroupOf(w->resource);
  if (g->linger_timer != 0) {  // back in use
    loop_->Cancel(g->linger_timer);
    g->linger_timer = 0;
  }
  if (!w->single && loop_->Now() - g->last_release <= kHandOffLinger) g->repeats = true;
  w->group = g;
  w->pos = g->fifo.insert(g->fifo.end(), w);
  size_t older = 0;  // older local waiters that wait (not one-shot TryLocks)
  for (RetryWaiter* o : g->fifo) older += o != w && !o->single;
  return older;
}

void RetryWakeups::Leave(RetryWaiter* w, bool acquired) {
  std::shared_ptr<RetryGroup> g = std::move(w->group);
  if (g == nullptr) return;
  g->fifo.erase(w->pos);
  if (acquired && g->contended) ++g->held;
  if (!g->fifo.empty()) return;
  if (!acquired && g->held == 0 && queue_.enabled()) {
    // Gave up (cancelled, out of time, an error): leave the queue, and pass
    // a hand-off made to us on to the next live entry -- once the join on
    // the way has put our entry there, if it has not yet.
    if (g->in_queue) {
      queue_.Leave(g);
    } else if (g->joining) {
      g->leave_on_join = true;
    }
  }
  MaybeDrop(g);
}

void RetryWakeups::MaybeDrop(const std::shared_ptr<RetryGroup>& g) {
  if (!g->fifo.empty() || g->held > 0) return;
  if (!g->contended || !queue_.enabled()) {
    groups_.erase(g->resource);  // drops the subscription
    return;
  }
  queue_.Linger(g);
}

void RetryWakeups::EnsureSubscribed(const std::shared_ptr<RetryGroup>& g) {
  if (g->subscription != nullptr || g->subscribing) return;
  g->subscribing = true;
  RetryGroup* raw = g.get();
  std::weak_ptr<RetryGroup> weak = g;
  g->confirms_due = 1;
  if (queue_.enabled()) queue_.SubscribeDirect(g);
  absl::StatusOr<std::unique_ptr<Subscription>> sub = subscriber_->Subscribe(
      ChannelOf(g->resource),
      // The subscription is owned by the group and destroyed with it, after
      // which this never runs again: the raw pointers are safe.
      [this, raw](absl::string_view, absl::string_view message) {
        OnReleased(raw, message);
      },
      [this, weak](absl::Status status) {
        std::shared_ptr<RetryGroup> g = weak.lock();
        if (g == nullptr) return;  // group gone (and `this` may be too)
        if (!status.ok()) {
          g->confirms_due = -1;  // never ready
          return OnSubscribed(g, std::move(status));
        }
        if (--g->confirms_due == 0) OnSubscribed(g, std::move(status));
      });
  if (!sub.ok()) {
    g->subscribing = false;  // timers only; retried on the next contention
    g->direct.reset();
    return;
  }
  g->subscription = std::move(*sub);
}

void RetryWakeups::OnSubscribed(const std::shared_ptr<RetryGroup>& g, absl::Status status) {
  g->subscribing = false;
  if (!status.ok()) {
    // Keep the dead subscription object until the group goes away (not
    // destroyed inside its own callback); waiters rely on their timers.
    return;
  }
  g->ready = true;
  std::vector<std::shared_ptr<RetryWaiter>> due;
  for (RetryWaiter* w : g->fifo) {
    if (w->pending_ready && !w->in_flight) due.push_back(attempts_->Get(w));
  }
  for (const std::shared_ptr<RetryWaiter>& w : due) {
    if (w->state == RetryWaiter::State::kPending && !w->in_flight) {
      w->pending_ready = false;
      // With the hand-off queue: join it (it answers "attempt now" if the
      // lock went free meanwhile) rather than attempt blind.
      if (queue_.enabled()) {
        g->contended = true;
        if (queue_.Join(w)) continue;
      }
      attempts_->StartAttempt(w);
    }
  }
}

void RetryWakeups::OnReleased(RetryGroup* g, absl::string_view message) {
  if (queue_.OnHandOff(g, message)) return;  // "w:<id>": for the queue
  // Our own release, already handed to a local waiter.
  if (g->handed_off.erase(message) > 0) return;
  if (queue_.OnRelease(g)) return;  // contended: the queue says who attempts
  if (wake_stagger_ > absl::ZeroDuration()) return StaggerWake(g);
  Wake(g, /*hand_off=*/false);
}

void RetryWakeups::StaggerWake(RetryGroup* g) {
  if (g->fifo.empty()) return;
  RetryWaiter* w = g->fifo.front();
  if (w->in_flight) {
    w->notified = true;  // retries at once should that attempt fail
    return;
  }
  std::shared_ptr<RetryWaiter> sw = attempts_->Get(w);
  if (sw->timer != 0) loop_->Cancel(sw->timer);
  const absl::Duration delay = std::min(attempts_->backoff().Jitter(wake_stagger_),
                                        sw->deadline - loop_->Now());
  std::weak_ptr<RetryWaiter> weak = sw;
  RetryAttempts* attempts = attempts_;
  sw->timer = loop_->RunAfter(std::max(delay, absl::ZeroDuration()), [attempts, weak] {
    std::shared_ptr<RetryWaiter> w = weak.lock();
    if (w == nullptr || w->state != RetryWaiter::State::kPending) return;
    w->timer = 0;
    attempts->StartAttempt(w);
  });
}

bool RetryWakeups::Wake(RetryGroup* g, bool hand_off) {
  // Wake the oldest waiter that is not already covered.
  for (RetryWaiter* w : g->fifo) {
    if (w->in_flight) {
      if (w->notified) continue;  // already has a wake-up pending
      w->notified = true;
      return true;
    }
    std::shared_ptr<RetryWaiter> sw = attempts_->Get(w);
    attempts_->StartAttempt(sw);
    // A hand-off attempt that still meets the lock (the release was not
    // applied first: its script went through a NOSCRIPT fallback, or it
    // only decremented a reentrant count) tries once more at once rather
    // than sleeping through the notification that Release suppressed.
    if (hand_off && sw->in_flight) sw->notified = true;
    return true;
  }
  return false;
}

}  // namespace dlock
