// Internal to //lock:retry_lock: the per-resource group (FIFO of local
// waiters, the release-channel subscription, hand-off tokens) and the
// per-Acquire waiter state, shared by retry_lock.cc (the wait: attempts,
// backoff, deadline, finish) and retry_lock_wake.cc (subscriptions, wake-ups,
// the local hand-off on Release).
#ifndef DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_
#define DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_

#include <cstddef>
#include <list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "dlock/lock/retry_lock.h"

namespace dlock {

struct RetryLock::Group {
  std::string resource;
  std::unique_ptr<Subscription> subscription;
  // Subscribe was called and on_ready has not run yet.
  bool subscribing = false;
  // The server confirmed the subscription: releases from now on reach us.
  bool ready = false;
  // Waiters of this resource, oldest first.
  std::list<Waiter*> fifo;
  // Tokens of releases made through this RetryLock that already woke a
  // local waiter (the hand-off in Release): their notifications must not
  // wake another.
  absl::flat_hash_set<std::string> handed_off;
};

namespace retry_lock_internal {
// Bounds Group::handed_off (a notification that never comes -- lost on a
// reconnect -- must not make it grow); past it, hand-offs are not recorded
// and their notifications wake one more waiter, as without hand-off.
constexpr size_t kMaxHandedOff = 64;
}  // namespace retry_lock_internal

struct RetryLock::Waiter : public Cancellable {
  enum class State { kPending, kDone, kCancelled };

  bool Cancel() override { return lock != nullptr && lock->CancelWaiter(this); }

  RetryLock* lock = nullptr;  // null once detached
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
  // Met contention before the subscription was ready: attempt once it is.
  bool pending_ready = false;
  std::shared_ptr<Group> group;
  std::list<Waiter*>::iterator pos;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_RETRY_LOCK_INTERNAL_H_
