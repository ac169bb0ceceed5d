// Internal to //redlock (namespace redlock_internal): `AcquireClock`, the
// time arithmetic of one Acquire (ACQUIRE and RETRIES in redlock.h) on the
// loop's monotonic clock:
//   - each attempt's validity: it counts from the attempt's first send
//     (`BeginAttempt`), never from a reply, and ends at
//     t0 + ttl - drift (the lease's local deadline);
//   - the budget across attempts: the caller's `wait` (or retry_count when
//     there is none), the retries made and the time spent pausing between
//     attempts;
//   - the observer events that report them (OnAcquireWait, OnAcquire).
// No I/O, no timers; AcquireOp runs the attempts.
#ifndef DLOCK_REDLOCK_ACQUIRE_CLOCK_H_
#define DLOCK_REDLOCK_ACQUIRE_CLOCK_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/observer.h"

namespace dlock {
namespace redlock_internal {

class AcquireClock {
 public:
  // An Acquire called at `call_time` for leases of `ttl`, of which `drift`
  // is the allowance (Core::Drift), waiting up to `wait` (0: retry_count
  // decides).
  AcquireClock(absl::Time call_time, absl::Duration ttl, absl::Duration drift, absl::Duration wait)
      : call_time_(call_time), ttl_(ttl), drift_(drift), wait_(wait) {}

  // A new attempt, first sent at `t0`.
  void BeginAttempt(absl::Time t0) { t0_ = t0; }
  absl::Time t0() const { return t0_; }
  absl::Duration ttl() const { return ttl_; }
  // The current attempt's lease deadline: t0 + ttl - drift.
  absl::Time ValidityEnd() const { return t0_ + ttl_ - drift_; }
  // How long its voting round may last: the per-server `timeout`, cut to
  // the validity.
  absl::Duration VotingTime(absl::Duration timeout) const {
    return std::min(timeout, ValidityEnd() - t0_);
  }
  // A quorum reached at `now`: OK while validity is left, else
  // kDeadlineExceeded saying how long the attempt took.
  absl::Status CheckValidity(absl::Time now) const;

  // Whether a failed attempt is followed by another `delay` from `now`:
  // never after a configuration error (`final`); with a wait budget, while
  // the next attempt starts within it; otherwise while fewer than
  // `retry_count` retries were made.
  bool MayRetry(bool final, absl::Time now, absl::Duration delay, int retry_count) const;

  // A pause of `delay` before the next attempt, starting at `now`, after
  // attempt `attempt` failed with `last_error`: counts the retry and returns
  // its OnAcquireWait event (viewing `resource` and `last_error`).
  AcquireWaitEvent Pause(absl::string_view resource, int attempt, const absl::Status& last_error,
                         absl::Duration delay, absl::Time now);
  // The pause is over: its time counts as waited.
  void Resume() { waited_ += pause_; }

  // The OnAcquire event of the outcome `status` at `now` after `attempts`
  // attempts; `fence` and the ttl are reported on success only.
  AcquireEvent Outcome(absl::string_view resource, const absl::Status& status, absl::Time now,
                       int attempts, int64_t fence) const;

 private:
  const absl::Time call_time_;
  const absl::Duration ttl_;
  const absl::Duration drift_;
  const absl::Duration wait_;
  absl::Time t0_;
  int retries_ = 0;
  absl::Duration waited_ = absl::ZeroDuration();
  absl::Duration pause_ = absl::ZeroDuration();  // the current or last pause
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_ACQUIRE_CLOCK_H_
