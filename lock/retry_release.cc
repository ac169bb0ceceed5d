// RetryRelease: a Release through a RetryLock and the hand-off it makes --
// to the oldest local waiter, or through the cross-client hand-off queue
// (see retry_lock_internal.h, handoff_scripts.h, docs/handoff.md). The
// wake-ups it is part of: retry_lock_wake.cc; the queue:
// retry_handoff_queue.cc.
#include <memory>
#include <string>
#include <utility>

#include "dlock/lock/retry_lock_internal.h"

namespace dlock {

absl::Status RetryRelease::Release(Lock* inner, const Lease& lease, StatusCallback callback) {
  auto it = wakeups_->groups_.find(lease.resource);
  if (it == wakeups_->groups_.end()) {
    if (!queue_->enabled()) return inner->Release(lease, std::move(callback));
    return Counting(lease, std::move(callback));
  }
  if (queue_->enabled() && it->second->contended) {
    return HandOff(it->second, lease, std::move(callback));
  }
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
  if (g != nullptr && wakeups_->Wake(g.get(), /*hand_off=*/true) && g->ready &&
      g->handed_off.size() < kMaxHandedOff) {
    g->handed_off.insert(std::move(token));
  }
  return s;
}

absl::Status RetryRelease::Counting(const Lease& lease, StatusCallback callback) {
  // Nobody of ours waits: the plain release's work, counting who heard
  // it. Another client's waiter did: the resource is contended, and this
  // client's next Acquire of it joins the queue rather than barging.
  RetryWakeups* wakeups = wakeups_;
  ReleaseNotifier::HandOffRelease how;
  std::weak_ptr<bool> alive = alive_;
  how.on_listeners = [wakeups, alive, resource = lease.resource](int64_t listeners) {
    if (listeners <= 0 || alive.lock() == nullptr || !*alive.lock()) return;
    std::shared_ptr<RetryGroup>& g = wakeups->GroupOf(resource);
    g->contended = true;
    g->last_release = wakeups->loop_->Now();
    wakeups->EnsureSubscribed(g);
    wakeups->MaybeDrop(g);  // lingers, subscribed, for the next Acquire
  };
  return queue_->handoff_->ReleaseForHandOff(lease, std::move(how), std::move(callback));
}

absl::Status RetryRelease::HandOff(std::shared_ptr<RetryGroup> g, const Lease& lease,
                                   StatusCallback callback) {
  // The resource is contended across clients: the release hands the lock
  // to the queue's oldest live waiter (another client, or ours back at
  // the tail when local waiters remain).
  // Our entry goes back at the tail when this client has waiters left or
  // came back for the lock soon after its last release (it will again:
  // its next Acquire then only waits, no join); should it not, it passes
  // the hand-off on when it comes (RetryHandOffQueue::OnHandOff) or leaves
  // when its group stops lingering.
  ReleaseNotifier::HandOffRelease how;
  how.hand_off = true;
  how.waiter_id = queue_->id_;
  how.rejoin = g->repeats || !g->fifo.empty();
  how.entry_ttl = queue_->entry_ttl_;
  g->last_release = wakeups_->loop_->Now();
  // Told (before the caller's callback) whether our entry went back in:
  // only when the lock was handed to another client.
  std::weak_ptr<RetryGroup> weak = g;
  how.on_listeners = [weak](int64_t) {
    if (std::shared_ptr<RetryGroup> g = weak.lock()) g->in_queue = true;
  };
  absl::Status s =
      queue_->handoff_->ReleaseForHandOff(lease, std::move(how), std::move(callback));
  if (!s.ok()) return s;
  g->in_queue = false;
  if (g->held > 0) --g->held;
  wakeups_->MaybeDrop(g);
  return s;
}

}  // namespace dlock
