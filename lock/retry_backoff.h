// This header defines `RetryBackoff`: RetryLock's capped exponential backoff
// with jitter. Before attempt n+1 the cap is min(max_backoff,
// initial_backoff * multiplier^(n-1)) (a multiplier below 1 counts as 1;
// RetryLock refuses one, and a zero initial_backoff, at creation);
// the delay is jitter(cap), by default full jitter: uniform in [0, cap]
// from absl::BitGen (so that waiters woken together spread out).
//
// Internal to //lock:retry_lock. Not thread-safe (it owns a BitGen).
#ifndef DLOCK_LOCK_RETRY_BACKOFF_H_
#define DLOCK_LOCK_RETRY_BACKOFF_H_

#include <functional>
#include <utility>

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace dlock {

class RetryBackoff {
 public:
  RetryBackoff(absl::Duration initial, absl::Duration max, double multiplier,
               std::function<absl::Duration(absl::Duration cap)> jitter)
      : initial_(initial), max_(max), multiplier_(multiplier), jitter_(std::move(jitter)) {}

  // The delay after `failures` (>= 1) failed attempts; never negative.
  absl::Duration Delay(int failures);
  // A delay in [0, cap] by the jitter function (also RetryLock's wake
  // stagger).
  absl::Duration Jitter(absl::Duration cap);

 private:

  const absl::Duration initial_;
  const absl::Duration max_;
  const double multiplier_;
  const std::function<absl::Duration(absl::Duration cap)> jitter_;
  absl::BitGen gen_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_RETRY_BACKOFF_H_
