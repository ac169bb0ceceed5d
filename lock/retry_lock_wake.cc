// RetryWakeups: the release-channel subscription of each resource being
// waited on, the notification that wakes one local waiter, and the local
// hand-off on Release (see retry_lock.h and retry_lock_internal.h). The
// attempt loop: retry_attempts.cc.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/retry_lock_internal.h"
#include "dlock/lock/tokens.h"
#include "dlock/transport/script.h"

namespace dlock {

RetryWakeups::RetryWakeups(EventLoop* loop, const ReleaseNotifier* notifier,
                           bool handoff_queue, absl::Duration wake_stagger,
                           absl::Duration entry_ttl)
    : loop_(loop),
      notifier_(notifier),
      subscriber_(notifier != nullptr ? notifier->ReleaseSubscriber() : nullptr),
      wake_stagger_(wake_stagger),
      id_(NewToken()),
      entry_ttl_(entry_ttl) {
  // The hand-off queue needs the lock's key, a transport for its scripts,
  // and release notifications to hear "w:<id>" on. A wake_stagger (the
  // older remedy, opted into) keeps the wake-everyone-staggered behaviour.
  if (handoff_queue && notifier_ != nullptr && subscriber_ != nullptr &&
      wake_stagger_ == absl::ZeroDuration() &&
      !notifier_->HandOffLockKey("r").empty() && notifier_->HandOffTransport() != nullptr) {
    handoff_ = notifier_;
    handoff_transport_ = notifier_->HandOffTransport();
  }
}

RetryWakeups::~RetryWakeups() {
  *alive_ = false;
  for (auto& [unused, g] : groups_) {
    if (g->linger_timer != 0) loop_->Cancel(g->linger_timer);
    g->linger_timer = 0;
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

size_t RetryWakeups::Join(RetryWaiter* w) {
  std::shared_ptr<RetryGroup>& g = groups_[w->resource];
  if (g == nullptr) {
    g = std::make_shared<RetryGroup>();
    g->resource = w->resource;
  }
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
  if (g->in_queue && !acquired && g->held == 0 && handoff_enabled()) {
    // Gave up (cancelled, out of time, an error): leave the queue, and pass
    // a hand-off made to us on to the next live entry.
    g->in_queue = false;
    (void)SendQueue(g, "leave", {});
  }
  MaybeDrop(g);
}

void RetryWakeups::MaybeDrop(const std::shared_ptr<RetryGroup>& g) {
  if (!g->fifo.empty() || g->held > 0) return;
  if (!g->contended || !handoff_enabled()) {
    groups_.erase(g->resource);  // drops the subscription
    return;
  }
  // Keep the subscription (and the knowledge that the resource is
  // contended) a little: a client that takes the lock again soon joins
  // the queue first instead of barging, without a new SUBSCRIBE.
  if (g->linger_timer != 0) loop_->Cancel(g->linger_timer);
  std::weak_ptr<RetryGroup> weak = g;
  g->linger_timer = loop_->RunAfter(kHandOffLinger, [this, weak] {
    std::shared_ptr<RetryGroup> g = weak.lock();
    if (g == nullptr) return;
    g->linger_timer = 0;
    if (!g->fifo.empty() || g->held > 0) return;
    if (g->in_queue && handoff_enabled()) {
      g->in_queue = false;
      (void)SendQueue(g, "leave", {});  // the entry our release kept
    }
    groups_.erase(g->resource);
  });
}

bool RetryWakeups::Queued(const RetryWaiter& w) const {
  return handoff_enabled() && w.group != nullptr && w.group->contended && w.group->ready;
}

bool RetryWakeups::JoinFirst(const RetryWaiter& w) const {
  return !w.single && handoff_enabled() && w.group != nullptr && w.group->contended;
}

absl::Status RetryWakeups::SendQueue(const std::shared_ptr<RetryGroup>& g,
                                     absl::string_view mode, std::weak_ptr<RetryWaiter> w) {
  const std::string channel = ChannelOf(g->resource);
  const std::string lock = handoff_->HandOffLockKey(g->resource);
  const std::string ttl_ms = absl::StrCat(absl::ToInt64Milliseconds(entry_ttl_));
  ++queue_calls_;
  const bool join = mode == "join";
  if (join) g->joining = true;
  std::weak_ptr<RetryGroup> weak_g = g;
  std::weak_ptr<bool> alive = alive_;
  return HandOffQueueScript().Run(
      *handoff_transport_, {lock, HandOffQueueKey(channel), HandOffQueueExpiryKey(channel)},
      {id_, ttl_ms, std::string(mode), channel}, absl::Seconds(5),
      [this, alive, weak_g, w, join](absl::StatusOr<Reply> reply) {
        if (alive.lock() == nullptr || !*alive.lock()) return;
        std::shared_ptr<RetryGroup> g = weak_g.lock();
        if (g == nullptr || !join) return;
        g->joining = false;
        absl::StatusOr<int64_t> r;
        if (!reply.ok()) {
          r = reply.status();
        } else if (reply->is_integer()) {
          r = reply->integer;
        } else {
          r = absl::InternalError(absl::StrCat("hand-off queue: ", reply->DebugString()));
        }
        OnJoined(g, w.lock(), std::move(r));
      });
}

bool RetryWakeups::Join(const std::shared_ptr<RetryWaiter>& w) {
  if (!Queued(*w)) return false;
  std::shared_ptr<RetryGroup> g = w->group;
  g->contended = true;
  if (g->joining) return true;  // its reply serves this waiter too
  if (!SendQueue(g, "join", w).ok()) return false;
  return true;
}

void RetryWakeups::OnJoined(const std::shared_ptr<RetryGroup>& g,
                            const std::shared_ptr<RetryWaiter>& w,
                            absl::StatusOr<int64_t> reply) {
  if (!reply.ok() && !absl::IsUnavailable(reply.status()) &&
      !absl::IsDeadlineExceeded(reply.status())) {
    // The queue is refused here (ACL, foreign data): wake as without it.
    handoff_broken_ = true;
  }
  const bool attempt = !reply.ok() || *reply == 0;
  if (reply.ok()) g->in_queue = true;  // head or queued: our entry is there
  if (!attempt) return;                // queued: "w:<id>" or the timer
  // Free and we are the head (or the queue failed): the oldest idle waiter
  // of the group attempts now.
  for (RetryWaiter* o : g->fifo) {
    if (o->in_flight || o->state != RetryWaiter::State::kPending) continue;
    attempts_->StartAttempt(attempts_->Get(o));
    return;
  }
  (void)w;
}

void RetryWakeups::EnsureSubscribed(const std::shared_ptr<RetryGroup>& g) {
  if (g->subscription != nullptr || g->subscribing) return;
  g->subscribing = true;
  RetryGroup* raw = g.get();
  std::weak_ptr<RetryGroup> weak = g;
  g->confirms_due = 1;
  if (handoff_enabled()) {
    // Hand-offs to this client come on its own channel.
    absl::StatusOr<std::unique_ptr<Subscription>> direct = subscriber_->Subscribe(
        HandOffChannel(ChannelOf(g->resource), id_),
        [this, raw](absl::string_view, absl::string_view message) {
          OnReleased(raw, message);
        },
        [this, weak](absl::Status status) {
          std::shared_ptr<RetryGroup> g = weak.lock();
          if (g == nullptr) return;
          // A hand-off channel refused: hand-offs then reach this client
          // by its refresh only (the lost-message fallback).
          (void)status;
          if (--g->confirms_due == 0 && g->subscription != nullptr) {
            OnSubscribed(g, absl::OkStatus());
          }
        });
    if (direct.ok()) {
      g->direct = std::move(*direct);
      g->confirms_due = 2;
    }
  }
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
      if (handoff_enabled()) {
        g->contended = true;
        if (Join(w)) continue;
      }
      attempts_->StartAttempt(w);
    }
  }
}

void RetryWakeups::OnReleased(RetryGroup* g, absl::string_view message) {
  if (handoff_enabled() && absl::StartsWith(message, kHandOffMessagePrefix)) {
    // A hand-off: only the client it names attempts.
    if (message.substr(sizeof(kHandOffMessagePrefix) - 1) != id_) return;
    if (!g->fifo.empty()) {
      Wake(g, /*hand_off=*/false);
      return;
    }
    // Nobody of ours waits (our entry was kept at the tail by our release):
    // leave, passing the hand-off on to the next live entry.
    if (g->in_queue) {
      g->in_queue = false;
      auto it = groups_.find(g->resource);
      if (it != groups_.end()) (void)SendQueue(it->second, "leave", {});
    }
    return;
  }
  // Our own release, already handed to a local waiter.
  if (g->handed_off.erase(message) > 0) return;
  if (handoff_enabled() && g->contended && g->ready) {
    // A release that handed to nobody (a plain release, or the queue held
    // no live entry): refresh our entry; the queue says whether we attempt,
    // and hands off to its head if that is another client.
    for (RetryWaiter* w : g->fifo) {
      if (w->in_flight) {
        w->notified = true;
        return;
      }
      Join(attempts_->Get(w));
      return;
    }
    return;
  }
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
  if (it == groups_.end()) {
    if (!handoff_enabled()) return inner->Release(lease, std::move(callback));
    // Nobody of ours waits: the plain release's work, counting who heard
    // it. Another client's waiter did: the resource is contended, and this
    // client's next Acquire of it joins the queue rather than barging.
    ReleaseNotifier::HandOffRelease how;
    std::weak_ptr<bool> alive = alive_;
    how.on_listeners = [this, alive, resource = lease.resource](int64_t listeners) {
      if (listeners <= 0 || alive.lock() == nullptr || !*alive.lock()) return;
      std::shared_ptr<RetryGroup>& g = groups_[resource];
      if (g == nullptr) {
        g = std::make_shared<RetryGroup>();
        g->resource = resource;
      }
      g->contended = true;
      g->last_release = loop_->Now();
      EnsureSubscribed(g);
      MaybeDrop(g);  // lingers, subscribed, for the next Acquire
    };
    return handoff_->ReleaseForHandOff(lease, std::move(how), std::move(callback));
  }
  if (handoff_enabled() && it->second->contended) {
    // The resource is contended across clients: the release hands the lock
    // to the queue's oldest live waiter (another client, or ours back at
    // the tail when local waiters remain).
    std::shared_ptr<RetryGroup> g = it->second;
    // Our entry goes back at the tail when this client has waiters left or
    // came back for the lock soon after its last release (it will again:
    // its next Acquire then only waits, no join); should it not, it passes
    // the hand-off on when it comes (OnReleased) or leaves when its group
    // stops lingering.
    ReleaseNotifier::HandOffRelease how;
    how.hand_off = true;
    how.waiter_id = id_;
    how.rejoin = g->repeats || !g->fifo.empty();
    how.entry_ttl = entry_ttl_;
    g->last_release = loop_->Now();
    // Told (before the caller's callback) whether our entry went back in:
    // only when the lock was handed to another client.
    std::weak_ptr<RetryGroup> weak = g;
    how.on_listeners = [weak](int64_t) {
      if (std::shared_ptr<RetryGroup> g = weak.lock()) g->in_queue = true;
    };
    absl::Status s = handoff_->ReleaseForHandOff(lease, std::move(how), std::move(callback));
    if (!s.ok()) return s;
    g->in_queue = false;
    if (g->held > 0) --g->held;
    MaybeDrop(g);
    return s;
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
  if (g != nullptr && Wake(g.get(), /*hand_off=*/true) && g->ready &&
      g->handed_off.size() < kMaxHandedOff) {
    g->handed_off.insert(std::move(token));
  }
  return s;
}

}  // namespace dlock
