// RetryHandOffQueue: the cross-client hand-off queue of a RetryLock's
// wake-ups -- joins, refreshes and leaves, the hand-offs heard on this
// client's own channel, the linger of a contended group (see
// retry_lock_internal.h, handoff_scripts.h, docs/handoff.md). The wake-ups
// it is part of: retry_lock_wake.cc; the release through the queue:
// retry_release.cc.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/retry_lock_internal.h"
#include "dlock/lock/tokens.h"
#include "dlock/transport/script.h"

namespace dlock {

namespace {

// A queue script's reply: the integer it answers, or why there is none.
absl::StatusOr<int64_t> QueueReply(absl::StatusOr<Reply> reply) {
  if (!reply.ok()) return reply.status();
  if (reply->is_integer()) return reply->integer;
  return absl::InternalError(absl::StrCat("hand-off queue: ", reply->DebugString()));
}

}  // namespace

RetryHandOffQueue::RetryHandOffQueue(RetryWakeups* wakeups, const ReleaseNotifier* notifier,
                                     bool handoff_queue, absl::Duration entry_ttl)
    : wakeups_(wakeups), id_(NewToken()), entry_ttl_(entry_ttl) {
  // The hand-off queue needs the lock's key, a transport for its scripts,
  // and release notifications to hear "w:<id>" on. A wake_stagger (the
  // older remedy, opted into) keeps the wake-everyone-staggered behaviour.
  if (handoff_queue && notifier != nullptr && wakeups_->subscriber_ != nullptr &&
      wakeups_->wake_stagger_ == absl::ZeroDuration() &&
      !notifier->HandOffLockKey("r").empty() && notifier->HandOffTransport() != nullptr) {
    handoff_ = notifier;
    handoff_transport_ = notifier->HandOffTransport();
  }
}

RetryHandOffQueue::~RetryHandOffQueue() { *alive_ = false; }

bool RetryHandOffQueue::Queued(const RetryWaiter& w) const {
  return enabled() && w.group != nullptr && w.group->contended && w.group->ready;
}

bool RetryHandOffQueue::JoinFirst(const RetryWaiter& w) const {
  return !w.single && enabled() && w.group != nullptr && w.group->contended;
}

absl::Status RetryHandOffQueue::SendQueue(const std::shared_ptr<RetryGroup>& g,
                                          absl::string_view mode, std::weak_ptr<RetryWaiter> w) {
  const std::string channel = wakeups_->ChannelOf(g->resource);
  const std::string lock = handoff_->HandOffLockKey(g->resource);
  const std::string queue = HandOffQueueKey(channel);
  const std::string expiry = HandOffQueueExpiryKey(channel);
  char ttl_ms[absl::numbers_internal::kFastToBufferSize];
  const char* ttl_end =
      absl::numbers_internal::FastIntToBuffer(absl::ToInt64Milliseconds(entry_ttl_), ttl_ms);
  ++queue_calls_;
  const bool join = mode == "join";
  if (join) g->joining = true;
  std::weak_ptr<RetryGroup> weak_g = g;
  std::weak_ptr<bool> alive = alive_;
  // The keys and args as views (Invoke copies them into the call's one
  // allocation), the callback kept there too.
  const absl::string_view keys[] = {lock, queue, expiry};
  const absl::string_view args[] = {
      id_, absl::string_view(ttl_ms, static_cast<size_t>(ttl_end - ttl_ms)), mode, channel};
  absl::Status sent = HandOffQueueScript().Invoke(
      *handoff_transport_, keys, args, absl::Seconds(5),
      [this, alive, weak_g, w, join](absl::StatusOr<Reply> reply) {
        if (alive.lock() == nullptr || !*alive.lock()) return;
        std::shared_ptr<RetryGroup> g = weak_g.lock();
        if (g == nullptr || !join) return;
        g->joining = false;
        OnJoined(g, w.lock(), QueueReply(std::move(reply)));
      });
  // Refused from the call: its callback never runs, so no join is on the way.
  if (!sent.ok() && join) g->joining = false;
  return sent;
}

bool RetryHandOffQueue::Join(const std::shared_ptr<RetryWaiter>& w) {
  if (!Queued(*w)) return false;
  std::shared_ptr<RetryGroup> g = w->group;
  g->contended = true;
  if (g->joining) return true;  // its reply serves this waiter too
  if (!SendQueue(g, "join", w).ok()) return false;
  return true;
}

void RetryHandOffQueue::OnJoined(const std::shared_ptr<RetryGroup>& g,
                                 const std::shared_ptr<RetryWaiter>& w,
                                 absl::StatusOr<int64_t> reply) {
  if (!reply.ok() && !absl::IsUnavailable(reply.status()) &&
      !absl::IsDeadlineExceeded(reply.status())) {
    // The queue is refused here (ACL, foreign data): wake as without it.
    handoff_broken_ = true;
  }
  const bool attempt = !reply.ok() || *reply == 0;
  if (reply.ok()) g->in_queue = true;  // head or queued: our entry is there
  const bool leave = std::exchange(g->leave_on_join, false);
  if (leave && reply.ok() && g->fifo.empty() && g->held == 0 && enabled()) {
    // The waits this join was for ended meanwhile (cancelled, out of time):
    // their Leave found no entry yet. Leave now, or a release would hand
    // the lock to nobody and the next waiter would sit out the grace.
    Leave(g);
    return;
  }
  if (!attempt) return;                // queued: "w:<id>" or the timer
  // Free and we are the head (or the queue failed): the oldest idle waiter
  // of the group attempts now.
  RetryAttempts* attempts = wakeups_->attempts_;
  for (RetryWaiter* o : g->fifo) {
    if (o->in_flight || o->state != RetryWaiter::State::kPending) continue;
    attempts->StartAttempt(attempts->Get(o));
    return;
  }
  (void)w;
}

void RetryHandOffQueue::Leave(const std::shared_ptr<RetryGroup>& g) {
  g->in_queue = false;
  (void)SendQueue(g, "leave", {});
}

void RetryHandOffQueue::SubscribeDirect(const std::shared_ptr<RetryGroup>& g) {
  RetryWakeups* wakeups = wakeups_;
  RetryGroup* raw = g.get();
  std::weak_ptr<RetryGroup> weak = g;
  // Hand-offs to this client come on its own channel.
  absl::StatusOr<std::unique_ptr<Subscription>> direct = wakeups->subscriber_->Subscribe(
      HandOffChannel(wakeups->ChannelOf(g->resource), id_),
      [wakeups, raw](absl::string_view, absl::string_view message) {
        wakeups->OnReleased(raw, message);
      },
      [wakeups, weak](absl::Status status) {
        std::shared_ptr<RetryGroup> g = weak.lock();
        if (g == nullptr) return;
        // A hand-off channel refused: hand-offs then reach this client
        // by its refresh only (the lost-message fallback).
        (void)status;
        if (--g->confirms_due == 0 && g->subscription != nullptr) {
          wakeups->OnSubscribed(g, absl::OkStatus());
        }
      });
  if (direct.ok()) {
    g->direct = std::move(*direct);
    g->confirms_due = 2;
  }
}

bool RetryHandOffQueue::OnHandOff(RetryGroup* g, absl::string_view message) {
  if (!enabled() || !absl::StartsWith(message, kHandOffMessagePrefix)) return false;
  // A hand-off: only the client it names attempts.
  if (message.substr(sizeof(kHandOffMessagePrefix) - 1) != id_) return true;
  if (!g->fifo.empty()) {
    wakeups_->Wake(g, /*hand_off=*/false);
    return true;
  }
  // Nobody of ours waits (our entry was kept at the tail by our release):
  // leave, passing the hand-off on to the next live entry.
  if (g->in_queue) {
    g->in_queue = false;
    auto it = wakeups_->groups_.find(g->resource);
    if (it != wakeups_->groups_.end()) (void)SendQueue(it->second, "leave", {});
  }
  return true;
}

bool RetryHandOffQueue::OnRelease(RetryGroup* g) {
  if (!enabled() || !g->contended || !g->ready) return false;
  // A release that handed to nobody (a plain release, or the queue held
  // no live entry): refresh our entry; the queue says whether we attempt,
  // and hands off to its head if that is another client.
  for (RetryWaiter* w : g->fifo) {
    if (w->in_flight) {
      w->notified = true;
      return true;
    }
    Join(wakeups_->attempts_->Get(w));
    return true;
  }
  return true;
}

void RetryHandOffQueue::Linger(const std::shared_ptr<RetryGroup>& g) {
  // Keep the subscription (and the knowledge that the resource is
  // contended) a little: a client that takes the lock again soon joins
  // the queue first instead of barging, without a new SUBSCRIBE.
  RetryWakeups* wakeups = wakeups_;
  EventLoop* loop = wakeups->loop_;
  if (g->linger_timer != 0) loop->Cancel(g->linger_timer);
  std::weak_ptr<RetryGroup> weak = g;
  g->linger_timer = loop->RunAfter(kHandOffLinger, [this, wakeups, weak] {
    std::shared_ptr<RetryGroup> g = weak.lock();
    if (g == nullptr) return;
    g->linger_timer = 0;
    if (!g->fifo.empty() || g->held > 0) return;
    if (g->in_queue && enabled()) Leave(g);  // the entry our release kept
    wakeups->groups_.erase(g->resource);
  });
}

}  // namespace dlock
