#include "dlock/lock/retry_backoff.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dlock {

absl::Duration RetryBackoff::Delay(int failures) {
  failures = std::max(failures, 1);
  const double factor = std::pow(std::max(multiplier_, 1.0), failures - 1);
  absl::Duration cap = max_;
  if (factor < 1e9) cap = std::min(cap, initial_ * factor);
  return std::max(Jitter(cap), absl::ZeroDuration());
}

absl::Duration RetryBackoff::Jitter(absl::Duration cap) {
  if (jitter_) return jitter_(cap);
  if (cap <= absl::ZeroDuration()) return absl::ZeroDuration();
  return absl::Nanoseconds(
      absl::Uniform<int64_t>(absl::IntervalClosed, gen_, 0, absl::ToInt64Nanoseconds(cap)));
}

}  // namespace dlock
