// Internal to //lock:retry_lock. RetryLock (retry_lock.cc, the facade) is
// built from two parts with one job each:
//   - RetryAttempts (retry_attempts.cc): the attempt loop of each waiting
//     Acquire -- attempts, the backoff-with-jitter schedule (RetryBackoff),
//     the wait's deadline, finishing and cancelling;
//   - RetryWakeups (retry_lock_wake.cc): the wake-ups -- the per-resource
//     FIFO of local waiters, its release-channel subscription, the
//     notification that wakes one waiter; with its parts
//     RetryHandOffQueue (retry_handoff_queue.cc): the cross-client hand-off
//     queue, when the wrapped lock has one, and RetryRelease
//     (retry_release.cc): a Release and the hand-off it makes (to the oldest
//     local waiter, or through the queue).
// RetryWaiter is one Acquire's state, RetryGroup one resource's; both are
// plain data the two parts share. Not thread-safe: the loop's thread only.
#ifndef DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_
#define DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/retry_backoff.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

class RetryAttempts;
class RetryWakeups;
struct RetryWaiter;

// A set of at most kMaxHandedOff tokens (below): a short vector searched
// linearly, no hash-set code of its own in every program with a RetryLock.
class HandedOffTokens {
 public:
  // Removes `token`; whether it was there.
  bool erase(absl::string_view token) {
    auto it = std::find(tokens_.begin(), tokens_.end(), token);
    if (it == tokens_.end()) return false;
    tokens_.erase(it);
    return true;
  }
  // Adds `token` unless it is there already.
  void insert(std::string token) {
    if (std::find(tokens_.begin(), tokens_.end(), token) == tokens_.end()) {
      tokens_.push_back(std::move(token));
    }
  }
  size_t size() const { return tokens_.size(); }

 private:
  std::vector<std::string> tokens_;
};

// The local waiters of one resource and its release-channel subscription.
struct RetryGroup {
  std::string resource;
  std::unique_ptr<Subscription> subscription;
  // With the hand-off queue: the subscription to this RetryLock's own
  // hand-off channel (HandOffChannel), made beside `subscription`; `ready`
  // once both are confirmed.
  std::unique_ptr<Subscription> direct;
  int confirms_due = 0;
  // Subscribe was called and on_ready has not run yet.
  bool subscribing = false;
  // The server confirmed the subscription: releases from now on reach us.
  bool ready = false;
  // Waiters of this resource, oldest first.
  std::list<RetryWaiter*> fifo;
  // Tokens of releases made through this RetryLock that already woke a
  // local waiter (the hand-off in Release): their notifications must not
  // wake another.
  HandedOffTokens handed_off;
  // The cross-client hand-off queue (handoff_scripts.h), when the wrapped
  // lock has one. `contended`: a waiter of this group ran the queue script
  // (it met another client's hold); from then on the group takes part in
  // the queue: releases through this RetryLock hand off, a new Acquire
  // joins before it attempts, and the group (with its subscription) lingers
  // kHandOffLinger after its last waiter and its last lease.
  bool contended = false;
  // This RetryLock's entry may be in the server's queue.
  bool in_queue = false;
  // A queue script of this group is in flight.
  bool joining = false;
  // The group's waits all ended without the lock while its first join was
  // in flight (no entry known yet to leave): leave once the join answers,
  // if nobody waits then.
  bool leave_on_join = false;
  // Leases of this resource granted to this group's waiters and not yet
  // released through this RetryLock.
  int held = 0;
  TimerId linger_timer = 0;
  // When a lease of this resource was last released through this
  // RetryLock (InfinitePast: never), and whether this client came back for
  // the resource within kHandOffLinger of a release: then its releases keep
  // its queue entry at the tail (it will wait again), else they drop it (a
  // one-shot process, e.g. `dlock run`, leaves nothing queued behind).
  absl::Time last_release = absl::InfinitePast();
  bool repeats = false;
};

// How long a contended group outlives its last waiter and lease.
inline constexpr absl::Duration kHandOffLinger = absl::Seconds(1);

// Bounds RetryGroup::handed_off (a notification that never comes -- lost on
// a reconnect -- must not make it grow); past it, hand-offs are not recorded
// and their notifications wake one more waiter, as without hand-off.
inline constexpr size_t kMaxHandedOff = 64;

// One Acquire of a RetryLock: pending -> done (callback ran) or cancelled.
struct RetryWaiter : public Cancellable {
  enum class State { kPending, kDone, kCancelled };

  bool Cancel() override;  // RetryAttempts::Cancel

  RetryAttempts* owner = nullptr;  // null once detached
  std::string resource;
  AcquireOptions options;  // wait = 0: what each attempt asks the inner lock
  absl::Time start;
  absl::Time deadline;
  bool single = false;  // wait == 0: one attempt, the inner result as is
  LeaseCallback callback;
  State state = State::kPending;
  int attempts = 0;
  absl::Duration waited;
  absl::Time sleep_start;
  TimerId timer = 0;
  // Fires at `deadline` (waits only): the wait's hard bound.
  TimerId deadline_timer = 0;
  // The error of the last attempt that failed (for the final message).
  absl::Status last_error;
  AcquireHandle inner;
  bool in_flight = false;
  // The attempt in flight was sent while the subscription was ready.
  bool sent_ready = false;
  // A release notification arrived while the attempt was in flight.
  bool notified = false;
  // Got the lease (Leave: the group's queue entry stays until the release).
  bool acquired = false;
  // Met contention before the subscription was ready: attempt once it is.
  bool pending_ready = false;
  std::shared_ptr<RetryGroup> group;
  std::list<RetryWaiter*>::iterator pos;
  // While registered with RetryAttempts (Add to Detach): the owning
  // pointer (the caller's handle is weak) and the place in its list.
  std::shared_ptr<RetryWaiter> self;
  std::list<RetryWaiter*>::iterator registered;
};

// The cross-client hand-off queue of a RetryLock (handoff_scripts.h,
// docs/handoff.md), over a notifier that has one. Owns this RetryLock's
// entry id, the queue scripts (join, refresh, leave) and what their replies
// start, the hand-offs heard on this client's own channel, the linger of a
// contended group, and whether the queue still works here (its release
// script is RetryRelease's). Owns no group: it is part of RetryWakeups,
// whose groups it marks (contended, in_queue, joining) and wakes, drops.
class RetryHandOffQueue {
 public:
  // `handoff_queue`: use the notifier's queue when it has one
  // (RetryLockOptions::handoff_queue). `entry_ttl`: how long a queue entry
  // lives without a refresh (longer than the backoff timer's longest sleep).
  // Built last of `wakeups`' members: reads its subscriber and stagger.
  RetryHandOffQueue(RetryWakeups* wakeups, const ReleaseNotifier* notifier, bool handoff_queue,
                    absl::Duration entry_ttl);
  ~RetryHandOffQueue();

  // Whether the hand-off queue can be used at all.
  bool enabled() const { return handoff_ != nullptr && !handoff_broken_; }
  // Queue scripts sent (joins, refreshes, leaves), for the bench's profile.
  int64_t queue_calls() const { return queue_calls_; }
  // Whether the hand-off queue is in use for `w`'s resource (its group is
  // contended and its subscription confirmed): then `w` joins or refreshes
  // its entry (Join) instead of attempting blind.
  bool Queued(const RetryWaiter& w) const;
  // Whether `w` (wait > 0, no older local waiters) should join the queue
  // before any attempt: its group lingers from recent contention.
  bool JoinFirst(const RetryWaiter& w) const;
  // Runs the queue script (join or refresh) for `w`'s group; told "free,
  // you are the head" the group's oldest idle waiter attempts at once; told
  // "queued" it sleeps until "w:<id>" or its backoff timer (which calls
  // Join again). False when the queue is not usable (then attempt instead).
  bool Join(const std::shared_ptr<RetryWaiter>& w);
  // Takes `g`'s entry out of the queue (in_queue), passing a hand-off made
  // to it on to the next live entry.
  void Leave(const std::shared_ptr<RetryGroup>& g);
  // enabled(): subscribes `g` to this client's own hand-off channel
  // (g->direct), the second confirmation `g` waits for.
  void SubscribeDirect(const std::shared_ptr<RetryGroup>& g);
  // A message on `g`'s channels: true if it was a hand-off (handled here).
  bool OnHandOff(RetryGroup* g, absl::string_view message);
  // A release notification that handed to nobody: true if the queue, in
  // use for `g`, decides who attempts (then nobody else is woken).
  bool OnRelease(RetryGroup* g);
  // `g` (contended, no waiter, no lease) stays kHandOffLinger, subscribed.
  void Linger(const std::shared_ptr<RetryGroup>& g);

 private:
  friend class RetryRelease;  // releases through the queue

  // Sends the queue script in `mode` ("join" or "leave") for `g`.
  absl::Status SendQueue(const std::shared_ptr<RetryGroup>& g, absl::string_view mode,
                         std::weak_ptr<RetryWaiter> w);
  void OnJoined(const std::shared_ptr<RetryGroup>& g, const std::shared_ptr<RetryWaiter>& w,
                absl::StatusOr<int64_t> reply);

  RetryWakeups* const wakeups_;
  // The notifier when it has a usable queue, else nullptr.
  const ReleaseNotifier* handoff_ = nullptr;
  Transport* handoff_transport_ = nullptr;
  // Set when a queue script failed (e.g. refused by an ACL): from then on
  // this RetryLock wakes as without a queue.
  bool handoff_broken_ = false;
  // This RetryLock's entry id in every queue (random, like a token).
  const std::string id_;
  const absl::Duration entry_ttl_;
  int64_t queue_calls_ = 0;
  // Guards callbacks of scripts in flight against this object's end.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The releases made through a RetryLock, and what they start for its
// waiters: the local hand-off (the oldest local waiter attempts at once,
// right behind the release); on a resource contended across clients, the
// hand-off queue's release, which hands the lock to the queue's oldest live
// waiter; with the queue, on a resource nobody of ours waits for, a release
// that counts who heard it (another client's waiter: the resource is
// contended). Owns only its callbacks' guard: it is part of RetryWakeups,
// whose groups it acts on, beside its hand-off queue.
class RetryRelease {
 public:
  RetryRelease(RetryWakeups* wakeups, RetryHandOffQueue* queue)
      : wakeups_(wakeups), queue_(queue) {}
  ~RetryRelease() { *alive_ = false; }

  // `inner`->Release, handing the resource to the oldest local waiter.
  absl::Status Release(Lock* inner, const Lease& lease, StatusCallback callback);

 private:
  // The queue's release of `lease`, none of whose waiters are ours.
  absl::Status Counting(const Lease& lease, StatusCallback callback);
  // The queue's release of `lease`, whose group `g` is contended.
  absl::Status HandOff(std::shared_ptr<RetryGroup> g, const Lease& lease,
                       StatusCallback callback);

  RetryWakeups* const wakeups_;
  RetryHandOffQueue* const queue_;
  // Guards callbacks of releases in flight against this object's end.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The wake-ups of a RetryLock's waiters (see retry_lock.h): one
// subscription per resource being waited on, shared by its waiters and
// dropped with the last of them; a notification wakes the oldest waiter
// (after a jittered delay with wake_stagger); a Release through the
// RetryLock wakes it at once (the local hand-off). Owns the groups (with
// their FIFOs and subscriptions) and its parts RetryHandOffQueue and
// RetryRelease, which act on them.
class RetryWakeups {
 public:
  // Channels and the transport to subscribe on: `notifier`'s (nullptr, or
  // a notifier without a subscriber: no wake-ups, backoff timers only).
  // `handoff_queue`, `entry_ttl`: the hand-off queue's (RetryHandOffQueue).
  RetryWakeups(EventLoop* loop, const ReleaseNotifier* notifier, bool handoff_queue,
               absl::Duration wake_stagger, absl::Duration entry_ttl);
  ~RetryWakeups();

  // Set once, before any waiter joins: who makes the attempts.
  void set_attempts(RetryAttempts* attempts) { attempts_ = attempts; }
  // Whether release notifications can be subscribed to at all.
  bool enabled() const { return subscriber_ != nullptr; }
  // The cross-client hand-off queue (Queued, JoinFirst, Join, ...).
  RetryHandOffQueue& queue() { return queue_; }

  // Puts `w` at the back of its resource's FIFO (sets w->group, w->pos);
  // returns how many older waiters of it wait (one-shot tries not counted).
  size_t Join(RetryWaiter* w);
  // Takes `w` out of its FIFO (`acquired`: it got the lease); the last one
  // out drops the group and its subscription (a contended group lingers).
  void Leave(RetryWaiter* w, bool acquired);
  // Subscribes to `g`'s release channel unless done or under way.
  void EnsureSubscribed(const std::shared_ptr<RetryGroup>& g);
  // `inner`->Release (RetryRelease::Release).
  absl::Status Release(Lock* inner, const Lease& lease, StatusCallback callback) {
    return release_.Release(inner, lease, std::move(callback));
  }
  // Live subscriptions.
  size_t subscriptions() const;
  size_t confirmed_subscriptions() const;

 private:
  friend class RetryHandOffQueue;  // act on the groups
  friend class RetryRelease;

  void OnSubscribed(const std::shared_ptr<RetryGroup>& g, absl::Status status);
  void OnReleased(RetryGroup* g, absl::string_view message);
  // Wakes the oldest waiter of `g` not already woken; false if none.
  // `hand_off`: woken by a local Release rather than a notification.
  bool Wake(RetryGroup* g, bool hand_off);
  // wake_stagger > 0: (re)arms the oldest waiter's attempt after a
  // jittered delay; an attempt in flight is marked to retry instead.
  void StaggerWake(RetryGroup* g);
  std::string ChannelOf(absl::string_view resource) const;
  // The group of `resource`, made if there is none.
  std::shared_ptr<RetryGroup>& GroupOf(const std::string& resource);
  // Drops `g` now, or lets it linger (RetryHandOffQueue::Linger).
  void MaybeDrop(const std::shared_ptr<RetryGroup>& g);

  EventLoop* const loop_;
  const ReleaseNotifier* const notifier_;
  Transport* const subscriber_;
  const absl::Duration wake_stagger_;
  RetryAttempts* attempts_ = nullptr;
  absl::flat_hash_map<std::string, std::shared_ptr<RetryGroup>> groups_;
  // Last: built from the members above, destroyed first (the queue's
  // constructor reads subscriber_ and wake_stagger_).
  RetryHandOffQueue queue_;
  RetryRelease release_{this, &queue_};
};

// The attempt loop of a RetryLock's waiters (see retry_lock.h): each attempt
// is one inner Acquire; a retried failure sleeps by the backoff schedule
// (or until a wake-up); the wait ends with a lease, a non-retried error, or
// kDeadlineExceeded at its deadline.
class RetryAttempts {
 public:
  RetryAttempts(EventLoop* loop, Lock* inner, const RetryLockOptions& options,
                RetryWakeups* wakeups);

  // Registers `w` (its request fields set) and arms its deadline timer.
  void Add(const std::shared_ptr<RetryWaiter>& w);
  // The first attempt. Non-OK: the inner lock's rejection; the wait is over
  // and its callback will never run.
  absl::Status First(const std::shared_ptr<RetryWaiter>& w);
  // An attempt now (a wake-up or the backoff timer); a rejection finishes
  // the wait on a later turn.
  void StartAttempt(const std::shared_ptr<RetryWaiter>& w);
  // Sleeps until the next attempt by the backoff schedule (never past the
  // deadline), reporting the AcquireWaitEvent for `last_error`.
  void ScheduleBackoff(const std::shared_ptr<RetryWaiter>& w, const absl::Status& last_error);
  // Ends `w` without its callback (RetryWaiter::Cancel); false if it ended.
  bool Cancel(RetryWaiter* w);
  void CancelAll();

  // The owning pointer of a registered waiter (null once detached).
  std::shared_ptr<RetryWaiter> Get(RetryWaiter* w) { return w->self; }
  RetryBackoff& backoff() { return backoff_; }
  int64_t attempts() const { return attempts_; }
  size_t waiting() const { return waiters_.size(); }

 private:
  // Sends one inner Acquire for `w`; returns the inner lock's rejection.
  absl::Status Send(const std::shared_ptr<RetryWaiter>& w);
  void OnAttemptResult(const std::shared_ptr<RetryWaiter>& w, absl::StatusOr<Lease> result);
  // The wait's deadline came: abandon any attempt in flight, finish.
  void OnDeadline(const std::shared_ptr<RetryWaiter>& w);
  void FinishAtDeadline(const std::shared_ptr<RetryWaiter>& w, bool in_flight);
  void Detach(RetryWaiter* w);
  void Finish(const std::shared_ptr<RetryWaiter>& w, absl::StatusOr<Lease> result);

  EventLoop* const loop_;
  Lock* const inner_;
  LockObserver* const observer_;
  RetryBackoff backoff_;
  RetryWakeups* const wakeups_;
  int64_t attempts_ = 0;
  std::list<RetryWaiter*> waiters_;  // registered, oldest first (owned by `self`)
};

}  // namespace dlock

#endif  // DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_
