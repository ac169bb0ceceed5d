// This header defines the observer reports every lease policy shares: the
// AcquireEvent of an acquire (one try or a wait), the LateGrantEvent of a
// single-server grant released again, the AcquireWaitEvent of a wait, and
// the message of a wait that ran out. Internal to lock/. Call only on the
// loop's thread.
#ifndef DLOCK_LOCK_LEASE_REPORTS_H_
#define DLOCK_LOCK_LEASE_REPORTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"

namespace dlock {

// The observer's events of an Acquire, shared by the one-try acquire
// (FinishAcquire) and the waits (RetryLock, FairLock):
//   - ReportAcquire: the AcquireEvent of an Acquire that ended with `result`
//     (fence and ttl from the lease when OK);
//   - ReportAcquireWait: the AcquireWaitEvent of a wait whose attempt
//     `attempt` failed with `last_error`;
//   - WaitDeadlineMessage: the start of the kDeadlineExceeded message of a
//     wait that ran out: "<what> not acquired within the wait of W (N
//     attempt(s)" -- the caller closes the parenthesis.
void ReportAcquire(LockObserver* observer, absl::string_view policy,
                   absl::string_view resource, const absl::StatusOr<Lease>& result,
                   absl::Duration latency, absl::Duration waited, int attempts);
// The observer's LateGrantEvent of a single-server acquire's grant that is
// released again (operation "acquire"; `reason`: observer.h's kLateGrant*).
void ReportLateGrant(LockObserver* observer, absl::string_view policy,
                     absl::string_view resource, absl::string_view reason);
void ReportAcquireWait(LockObserver* observer, absl::string_view policy,
                       absl::string_view resource, int attempt, const absl::Status& last_error,
                       absl::Duration next_attempt_in, absl::Duration wait_left);
std::string WaitDeadlineMessage(absl::string_view what, absl::Duration wait, int attempts);

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_REPORTS_H_
