// RetryWakeups: the release-channel subscription of each resource being
// waited on, the notification that wakes one local waiter, and the local
// hand-off on Release (see retry_lock.h and retry_lock_internal.h). The
// attempt loop: retry_attempts.cc.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

RetryWakeups::RetryWakeups(EventLoop* loop, const ReleaseNotifier* notifier,
                           absl::Duration wake_stagger)
    : loop_(loop),
      notifier_(notifier),
      subscriber_(notifier != nullptr ? notifier->ReleaseSubscriber() : nullptr),
      wake_stagger_(wake_stagger) {}

RetryWakeups::~RetryWakeups() = default;

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

size_t RetryWakeups::Join(RetryWaiter* w) {
  std::shared_ptr<RetryGroup>& g = groups_[w->resource];
  if (g == nullptr) {
    g = std::make_shared<RetryGroup>();
    g->resource = w->resource;
  }
  w->group = g;
  w->pos = g->fifo.insert(g->fifo.end(), w);
  size_t older = 0;  // older local waiters that wait (not one-shot TryLocks)
  for (RetryWaiter* o : g->fifo) older += o != w && !o->single;
  return older;
}

void RetryWakeups::Leave(RetryWaiter* w) {
  std::shared_ptr<RetryGroup> g = std::move(w->group);
  if (g == nullptr) return;
  g->fifo.erase(w->pos);
  if (g->fifo.empty()) groups_.erase(g->resource);  // drops the subscription
}

void RetryWakeups::EnsureSubscribed(const std::shared_ptr<RetryGroup>& g) {
  if (g->subscription != nullptr || g->subscribing) return;
  g->subscribing = true;
  RetryGroup* raw = g.get();
  std::weak_ptr<RetryGroup> weak = g;
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
        OnSubscribed(g, std::move(status));
      });
  if (!sub.ok()) {
    g->subscribing = false;  // timers only; retried on the next contention
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
      attempts_->StartAttempt(w);
    }
  }
}

void RetryWakeups::OnReleased(RetryGroup* g, absl::string_view message) {
  // Our own release, already handed to a local waiter.
  if (g->handed_off.erase(message) > 0) return;
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

absl::Status RetryWakeups::Release(Lock* inner, const Lease& lease, StatusCallback callback) {
  auto it = groups_.find(lease.resource);
  if (it == groups_.end()) return inner->Release(lease, std::move(callback));
  // Local hand-off. The oldest local waiter attempts now, so its acquire
  // goes out in the same write as the release, right behind it on the same
  // connection, instead of a round trip later when the notification comes.
  std::weak_ptr<RetryGroup> weak = it->second;
  std::string token = lease.token;
  absl::Status s = inner->Release(
      lease, [weak, token, callback = std::move(callback)](absl::Status status) mutable {
        // Not released (or not known to be): no notification will match.
        if (!status.ok()) {
          if (std::shared_ptr<RetryGroup> g = weak.lock()) g->handed_off.erase(token);
        }
        if (callback) std::move(callback)(std::move(status));
      });
  if (!s.ok()) return s;
  std::shared_ptr<RetryGroup> g = weak.lock();
  if (g != nullptr && Wake(g.get(), /*hand_off=*/true) && g->ready &&
      g->handed_off.size() < kMaxHandedOff) {
    g->handed_off.insert(std::move(token));
  }
  return s;
}

}  // namespace dlock
