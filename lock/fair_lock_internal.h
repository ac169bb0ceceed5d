// Internal to //lock:fair_lock: the state a FairLock shares with its
// operations in flight (Core: commands, options, the waiter-channel
// subscription, the waits by waiter id) and one wait in the queue
// (FairWait). fair_lock.cc holds FairLock, Core and the one-try acquire;
// fair_wait.cc the wait.
#ifndef DLOCK_LOCK_FAIR_LOCK_INTERNAL_H_
#define DLOCK_LOCK_FAIR_LOCK_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/fair_commands.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/lease_core.h"

namespace dlock {

class FairWait;

struct FairLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const FairLockOptions& options);

  // Subscribes to this instance's waiter channel once (kept until the
  // FairLock is destroyed). Waits queued before it was confirmed re-attempt
  // when it is (FairWait::OnSubscribed).
  static void EnsureSubscribed(const std::shared_ptr<Core>& core);
  // A notification naming `waiter` (one of ours, or one already gone).
  void OnNotified(absl::string_view waiter);
  // FairRelease of `token` (a placeholder to release none) and of
  // `waiter`'s entry (empty: none), in the background, retried while its
  // outcome is unknown and the key or entry could exist (until `expiry`).
  static void ReleaseInBackground(std::shared_ptr<Core> core, std::string resource,
                                  std::string token, std::string waiter, absl::Time expiry);

  FairCommands commands;
  const absl::Duration queue_ttl;
  // FairLockOptions inherits SimpleLockOptions::replica_ack, which the fair
  // scripts do not implement: a request for it is refused (kInvalidArgument
  // from Acquire and Extend: LeaseCore's extend_check) rather than silently
  // ignored.
  const std::string instance_id;
  int64_t attempts = 0;
  // Pending waits by waiter id (what keeps them alive between attempts);
  // a FairWait removes itself when it ends (done or cancelled), which also
  // breaks the wait -> core -> wait cycle. ~FairLock cancels the rest.
  absl::flat_hash_map<std::string, std::shared_ptr<FairWait>> waits;
  std::unique_ptr<Subscription> subscription;
  bool subscribing = false;
  bool subscribed = false;  // the server confirmed it
  bool closed = false;      // the FairLock is gone: no new subscription
};

// One Acquire with a wait: pending -> done (callback ran) or cancelled.
// Owned by Core::waits while pending (its handle and timers hold weak
// pointers; a reply in flight holds a strong one).
class FairWait : public Cancellable, public std::enable_shared_from_this<FairWait> {
 public:
  FairWait(std::shared_ptr<FairLock::Core> core, std::string resource,
           absl::Duration ttl, absl::Duration wait, LeaseCallback callback);

  // Registers with the core and sends the first attempt. Non-OK: the
  // transport rejected it (the callback will never run).
  absl::Status Start();
  bool Cancel() override;
  // A notification named this waiter: attempt now (or right after the
  // attempt in flight).
  void OnWake();
  // The waiter channel is confirmed: re-attempt if the last attempt queued
  // before it was (a notification may have been missed).
  void OnSubscribed();

 private:
  enum class State { kPending, kDone, kCancelled };

  // Sends one FairAcquire; false if the transport rejected it (then the
  // wait finishes with that error on a later turn).
  absl::Status Send();
  void OnReply(const std::string& token, absl::Time sent_at, bool sent_subscribed,
               absl::StatusOr<FairAcquireReply> reply);
  void OnQueued(const FairAcquireReply& reply, bool sent_subscribed);
  void ScheduleAttempt(absl::Duration delay);
  void OnDeadline();
  // Removes the entry (and releases `token` should it hold the lock), in
  // the background, retried while unknown.
  void Leave(const std::string& token);
  // Releases `token` only (a lost reply's), keeping the place in the queue.
  void Undo(const std::string& token, absl::Time key_expiry);
  void Detach();
  void Finish(absl::StatusOr<Lease> result);

  std::shared_ptr<FairLock::Core> core_;
  const std::string resource_;
  const std::string waiter_;  // "<instance id>:<wait id>"
  const absl::Duration ttl_;
  const absl::Time start_;
  const absl::Time deadline_;
  LeaseCallback callback_;
  State state_ = State::kPending;
  int attempts_ = 0;
  // The attempt in flight (token empty: none), and whether a wake-up came
  // while it was.
  std::string in_flight_token_;
  bool woken_ = false;
  // The last attempt queued before the subscription was confirmed.
  bool queued_unsubscribed_ = false;
  FairAcquireReply last_queued_;
  absl::Status last_error_;
  TimerId timer_ = 0;
  TimerId deadline_timer_ = 0;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_FAIR_LOCK_INTERNAL_H_
