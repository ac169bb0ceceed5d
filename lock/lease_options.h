// This header defines `LeaseOptions`: the options every single-server lease
// policy shares (SimpleLock, ReentrantLock, Semaphore, ReadWriteLock,
// FairLock). Each policy's options struct derives from it and adds its own,
// so `options.key_prefix = ...` reads the same on all of them.
#ifndef DLOCK_LOCK_LEASE_OPTIONS_H_
#define DLOCK_LOCK_LEASE_OPTIONS_H_

#include <string>

#include "absl/time/time.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/observer.h"

namespace dlock {

struct LeaseOptions {
  // Prefix of every key (see KeyScheme). Locks, semaphores and queues that
  // must see each other need the same prefix.
  std::string key_prefix = "dlock:";
  // Bound on each round trip to the server (acquire, release, extend).
  absl::Duration command_timeout = absl::Seconds(2);
  // Drift allowance subtracted from the lease deadline:
  // ttl * drift_factor + drift_constant (Redlock's 1% + 2 ms).
  double drift_factor = kDefaultDriftFactor;
  absl::Duration drift_constant = kDefaultDriftConstant;
  // The restart rule for a single server (off by default): when > 0, a
  // server whose data-set marker (KeyScheme::DataSetKey) began less than
  // this long ago refuses every acquire with kUnavailable "data set began N
  // ms ago ..." (IsYoungDataSet), so a server restarted without persistence
  // grants nothing until every lease it may have lost has expired. Set it to
  // at least the largest TTL any client of the resource uses. A brand-new
  // server is then refused for this long after first contact, unless it is
  // declared trusted (TrustDataSetCommand). Must be >= 0.
  absl::Duration restart_window = absl::ZeroDuration();
  // Receives OnAcquire / OnRelease / OnExtend under the policy's name.
  // nullptr: none. Must outlive the policy's operations.
  LockObserver* observer = nullptr;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_OPTIONS_H_
