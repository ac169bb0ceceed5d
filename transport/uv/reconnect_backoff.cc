#include "dlock/transport/uv/reconnect_backoff.h"

#include <algorithm>

#include "absl/random/distributions.h"  // part of //absl/random

namespace dlock {

absl::Duration ReconnectBackoff::Delay(int failures) {
  absl::Duration d = min_;
  for (int i = 1; i < failures && d < max_; ++i) d *= 2;
  d = std::min(d, max_);
  if (jitter_ > 0) d *= absl::Uniform(rng_, 1.0 - jitter_, 1.0);
  return d;
}

}  // namespace dlock
