// This header defines `LeaseCore`: the state of one single-server lock
// (SimpleLock, ReentrantLock, Semaphore, ReadWriteLock, FairLock; each
// lock's Core derives from it) that its operations share -- loop, observer,
// timeout and drift options, the options' verdicts checked once at
// creation, the lease TTL check -- and `BackgroundRetries`, the timers of
// its background cleanups. Internal to lock/ (the target is private). Call
// only on the loop's thread.
#ifndef DLOCK_LOCK_LEASE_CORE_H_
#define DLOCK_LOCK_LEASE_CORE_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

// Background retries of cleanups after unknown outcomes (SimpleLock,
// ReentrantLock). Stop() -- run when the lock is destroyed, since its
// transport may be destroyed right after -- cancels every timer not yet run
// and ignores later RunLater calls; the keys then expire by their TTL. A
// callback must keep alive whatever owns this object until it runs.
class BackgroundRetries {
 public:
  explicit BackgroundRetries(EventLoop* loop) : loop_(loop) {}
  void RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn);
  void Stop();

 private:
  EventLoop* const loop_;
  bool stopped_ = false;
  // Pending cleanup timers: a few at most (a vector: smaller code than a
  // hash set).
  std::vector<TimerId> timers_;
};

// The state of one single-server lock that its operations share (held by
// shared_ptr, so the lock may be destroyed with operations in flight).
//
// The policy's OPTIONS are validated once, here, when the policy is
// created; each operation then returns the stored verdict (kInvalidArgument)
// from the call, before anything is sent:
//   release_check: command_timeout > 0;
//   extend_check:  that, ValidateReplicaAck(replica_ack), `extend_extra`;
//   acquire_check: that, restart_window >= 0, `acquire_extra`.
// (`*_extra`: the policy's own options, e.g. the semaphore's permits.)
struct LeaseCore {
  LeaseCore(EventLoop* loop, const LeaseOptions& options,
            const ReplicaAckOptions& replica_ack = ReplicaAckOptions(),
            absl::Status extend_extra = absl::OkStatus(),
            absl::Status acquire_extra = absl::OkStatus());

  // DriftAllowance (lease_rules.h) under this lock's options.
  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, drift_factor, drift_constant);
  }
  // ValidateLeaseTtl (lease_rules.h) under this lock's drift options.
  absl::Status CheckTtl(absl::Duration ttl) const {
    return ValidateLeaseTtl(ttl, kMaxTtl, drift_factor, drift_constant);
  }
  // The checks of every Acquire: acquire_check, ValidateResource and
  // CheckTtl. kInvalidArgument when one fails.
  absl::Status CheckAcquire(absl::string_view resource, absl::Duration ttl) const;
  // The checks of every Extend: extend_check, ValidateResourceToken and
  // CheckTtl.
  absl::Status CheckExtend(const Lease& lease, absl::Duration ttl) const;
  // The checks of every Release: release_check and ValidateResourceToken.
  absl::Status CheckRelease(const Lease& lease) const;

  EventLoop* const loop;
  LockObserver* const observer;
  const absl::Duration command_timeout;
  const double drift_factor;
  const absl::Duration drift_constant;
  const absl::Duration restart_window;
  const ReplicaAckOptions replica_ack;
  const absl::Status release_check;
  const absl::Status extend_check;
  const absl::Status acquire_check;
  // Cleanups after unknown outcomes; each callback holds the core.
  BackgroundRetries retries{loop};
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_CORE_H_
