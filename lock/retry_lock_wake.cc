// RetryLock's wake-ups: the release-channel subscription of each resource
// being waited on, the notification that wakes one local waiter, and the
// local hand-off on Release (see retry_lock.h). The wait itself:
// retry_lock.cc.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/lock/retry_lock.h"
#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

using retry_lock_internal::kMaxHandedOff;

size_t RetryLock::subscriptions() const {
  size_t n = 0;
  for (const auto& [unused, g] : groups_) n += g->subscription != nullptr;
  return n;
}

std::string RetryLock::ChannelOf(absl::string_view resource) const {
  return notifier_ != nullptr ? notifier_->ReleaseChannel(resource)
                              : keys_.ChannelKey(resource);
}

void RetryLock::EnsureSubscribed(const std::shared_ptr<Group>& g) {
  if (g->subscription != nullptr || g->subscribing) return;
  g->subscribing = true;
  Group* raw = g.get();
  std::weak_ptr<Group> weak = g;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = subscriber_->Subscribe(
      ChannelOf(g->resource),
      // The subscription is owned by the group and destroyed with it, after
      // which this never runs again: the raw pointers are safe.
      [this, raw](absl::string_view, absl::string_view message) {
        OnReleased(raw, message);
      },
      [this, weak](absl::Status status) {
        std::shared_ptr<Group> g = weak.lock();
        if (g == nullptr) return;  // group gone (and `this` may be too)
        OnSubscribed(g, std::move(status));
      });
  if (!sub.ok()) {
    g->subscribing = false;  // timers only; retried on the next contention
    return;
  }
  g->subscription = std::move(*sub);
}

void RetryLock::OnSubscribed(const std::shared_ptr<Group>& g, absl::Status status) {
  g->subscribing = false;
  if (!status.ok()) {
    // Keep the dead subscription object until the group goes away (not
    // destroyed inside its own callback); waiters rely on their timers.
    return;
  }
  g->ready = true;
  std::vector<std::shared_ptr<Waiter>> due;
  for (Waiter* w : g->fifo) {
    if (w->pending_ready && !w->in_flight) due.push_back(waiters_[w]);
  }
  for (const std::shared_ptr<Waiter>& w : due) {
    if (w->state == Waiter::State::kPending && !w->in_flight) StartAttempt(w);
  }
}

void RetryLock::OnReleased(Group* g, absl::string_view message) {
  // Our own release, already handed to a local waiter.
  if (g->handed_off.erase(message) > 0) return;
  if (options_.wake_stagger > absl::ZeroDuration()) return StaggerWake(g);
  Wake(g, /*hand_off=*/false);
}

void RetryLock::StaggerWake(Group* g) {
  if (g->fifo.empty()) return;
  Waiter* w = g->fifo.front();
  if (w->in_flight) {
    w->notified = true;  // retries at once should that attempt fail
    return;
  }
  std::shared_ptr<Waiter> sw = waiters_[w];
  if (sw->timer != 0) loop_->Cancel(sw->timer);
  const absl::Duration delay =
      std::min(backoff_.Jitter(options_.wake_stagger), sw->deadline - loop_->Now());
  std::weak_ptr<Waiter> weak = sw;
  sw->timer = loop_->RunAfter(std::max(delay, absl::ZeroDuration()), [this, weak] {
    std::shared_ptr<Waiter> w = weak.lock();
    if (w == nullptr || w->state != Waiter::State::kPending) return;
    w->timer = 0;
    StartAttempt(w);
  });
}

bool RetryLock::Wake(Group* g, bool hand_off) {
  // Wake the oldest waiter that is not already covered.
  for (Waiter* w : g->fifo) {
    if (w->in_flight) {
      if (w->notified) continue;  // already has a wake-up pending
      w->notified = true;
      return true;
    }
    std::shared_ptr<Waiter> sw = waiters_[w];
    StartAttempt(sw);
    // A hand-off attempt that still meets the lock (the release was not
    // applied first: its script went through a NOSCRIPT fallback, or it
    // only decremented a reentrant count) tries once more at once rather
    // than sleeping through the notification that Release suppressed.
    if (hand_off && sw->in_flight) sw->notified = true;
    return true;
  }
  return false;
}

absl::Status RetryLock::Release(const Lease& lease, StatusCallback callback) {
  auto it = groups_.find(lease.resource);
  if (it == groups_.end()) return inner_->Release(lease, std::move(callback));
  // Local hand-off. The oldest local waiter attempts now, so its acquire
  // goes out in the same write as the release, right behind it on the same
  // connection, instead of a round trip later when the notification comes.
  std::weak_ptr<Group> weak = it->second;
  std::string token = lease.token;
  absl::Status s = inner_->Release(
      lease, [weak, token, callback = std::move(callback)](absl::Status status) mutable {
        // Not released (or not known to be): no notification will match.
        if (!status.ok()) {
          if (std::shared_ptr<Group> g = weak.lock()) g->handed_off.erase(token);
        }
        if (callback) std::move(callback)(std::move(status));
      });
  if (!s.ok()) return s;
  std::shared_ptr<Group> g = weak.lock();
  if (g != nullptr && Wake(g.get(), /*hand_off=*/true) && g->ready &&
      g->handed_off.size() < kMaxHandedOff) {
    g->handed_off.insert(std::move(token));
  }
  return s;
}

}  // namespace dlock
