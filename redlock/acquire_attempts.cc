#include "dlock/redlock/acquire_attempts.h"

#include "dlock/lock/observer.h"

namespace dlock {
namespace redlock_internal {

AcquireAttempts::~AcquireAttempts() {
  if (watching_) core_->Unwatch(&watch_);
}

void AcquireAttempts::UnwatchWhenSettled() {
  if (watching_ && outstanding_ == 0) {
    core_->Unwatch(&watch_);
    watching_ = false;
  }
}

void AcquireAttempts::Succeeded(absl::string_view token) {
  succeeded_ = current_;
  if (outstanding_ > 0) {
    // Stragglers of this attempt may still grant: Release must reach them.
    watch_.token = token;
    core_->Watch(&watch_);
    watching_ = true;
  }
}

absl::string_view AcquireAttempts::LateGrantReason(int attempt, bool syncing) const {
  const bool current = attempt == current_;
  absl::string_view reason;  // empty: kept
  if (attempt == succeeded_) {
    if (watch_.released) reason = kLateGrantReleased;
  } else if (!(current && syncing)) {
    reason = attempt == abandoned_ ? kLateGrantCancelled : kLateGrantLost;
  }
  return reason;
}

}  // namespace redlock_internal
}  // namespace dlock
