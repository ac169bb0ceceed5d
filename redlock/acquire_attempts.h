// Internal to //redlock (namespace redlock_internal): `AcquireAttempts`, the
// bookkeeping of one Acquire's attempts (see ACQUIRE, RETRIES and LATE
// GRANTS in redlock.h): which attempt is current (numbered from 1), which
// succeeded, which Cancel or Shutdown abandoned, how many acquire replies
// of the current one are still to come, and -- while grants of the attempt
// that succeeded may still arrive -- the watch of the lease's token that
// tells whether the lease was released meanwhile. AcquireOp (acquire_op.cc)
// sends the requests and decides; this class only counts and says which
// late grant is kept.
//
// Not thread-safe: call only on the thread running the RedLock's loop.
#ifndef DLOCK_REDLOCK_ACQUIRE_ATTEMPTS_H_
#define DLOCK_REDLOCK_ACQUIRE_ATTEMPTS_H_

#include "absl/strings/string_view.h"
#include "dlock/redlock/core.h"

namespace dlock {
namespace redlock_internal {

class AcquireAttempts {
 public:
  // `core` must outlive this object (the owning operation holds it).
  explicit AcquireAttempts(Core* core) : core_(core) {}
  // Stops watching, if it still does.
  ~AcquireAttempts();
  AcquireAttempts(const AcquireAttempts&) = delete;
  AcquireAttempts& operator=(const AcquireAttempts&) = delete;

  // Starts the next attempt, none of its replies to come yet; returns its
  // number.
  int Begin() {
    outstanding_ = 0;
    return ++current_;
  }
  // The current attempt (0 before the first).
  int current() const { return current_; }
  // One acquire request of the current attempt was sent.
  void Sent() { ++outstanding_; }
  // A reply of attempt `attempt` arrived.
  void Replied(int attempt) {
    if (attempt == current_) --outstanding_;
  }
  // Stops watching once no reply of the attempt that succeeded is to come.
  void UnwatchWhenSettled();

  // The current attempt succeeded with the lease `token` (whose bytes the
  // caller keeps): watched while replies of it are still to come.
  void Succeeded(absl::string_view token);
  // Cancel or Shutdown ended the operation during the current attempt.
  void Abandon() { abandoned_ = current_; }

  // Why a grant of `attempt` that arrived after the attempt was decided is
  // released again (one of observer.h's kLateGrant*), or empty when it is
  // kept: the attempt that succeeded, as long as the lease was not
  // released, or the current attempt while its fence is being synced
  // (`syncing`).
  absl::string_view LateGrantReason(int attempt, bool syncing) const;

 private:
  Core* const core_;
  int current_ = 0;
  int succeeded_ = 0;
  // The attempt in flight when Cancel or Shutdown ended the operation.
  int abandoned_ = 0;
  // Acquire replies of the current attempt still to come.
  int outstanding_ = 0;
  // Watches the lease's token while grants of the attempt that succeeded
  // may still arrive.
  Core::GrantWatch watch_;
  bool watching_ = false;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_ACQUIRE_ATTEMPTS_H_
