// This header defines the background cleanup of a single-server lock after
// an unknown outcome (a command that timed out or lost its connection may
// still have run): RunCleanup sends the cleanup again while its outcome
// stays unknown and the key could still exist; RunReleaseCleanup is its
// form for a release-like command. Internal to lock/ (the target is
// private). Call only on the loop's thread.
#ifndef DLOCK_LOCK_LEASE_CLEANUP_H_
#define DLOCK_LOCK_LEASE_CLEANUP_H_

#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_core.h"

namespace dlock {

// One cleanup command: sends it and calls `done(unknown)` once, with
// unknown = true when its outcome is unknown and worth another attempt.
// Returns the transport's rejection (then `done` never runs).
using CleanupSend =
    absl::AnyInvocable<absl::Status(absl::AnyInvocable<void(bool unknown) &&> done)>;

// Whether a command that failed with `status` may still have run on the
// server (kUnavailable, kDeadlineExceeded): an unknown outcome.
bool IsUnknownOutcome(const absl::Status& status);
inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

// Runs `send` now and, while its outcome stays unknown, again every 100 ms,
// at most 3 times in all and only while the key could still exist (before
// `key_expiry`). `core` is kept alive until the last attempt ends; its
// retries are stopped when the lock is destroyed. A rejected send ends the
// cleanup: the key expires by its TTL.
void RunCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                CleanupSend send);

// The callback of a release-like cleanup command: done(IsUnknownOutcome)
// of its result (an absl::Status or an absl::StatusOr<T>). One type for
// every policy, so each command type's send is compiled once for all.
struct CleanupDone {
  template <typename Result>
  void operator()(const Result& result) {
    Finish(StatusOf(result));
  }
  void Finish(const absl::Status& status);

  absl::AnyInvocable<void(bool unknown) &&> done;
};

// RunCleanup for a release-like command whose failure is unknown exactly
// when IsUnknownOutcome: send(on_result) sends it, on_result a CleanupDone.
template <typename Send>
void RunReleaseCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry, Send send) {
  RunCleanup(std::move(core), key_expiry,
             [send = std::move(send)](absl::AnyInvocable<void(bool) &&> done) mutable {
               return send(CleanupDone{std::move(done)});
             });
}

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_CLEANUP_H_
