// Internal to //transport/uv: `ReconnectBackoff`, the reconnect policy
// HiredisTransport and TlsTransport share (see the connection-state table
// in hiredis_transport.h): after `failures` consecutive failed attempts the
// next one waits
//   min(backoff_max, backoff_min * 2^(failures-1)) * U[1 - jitter, 1],
// and a connection lost after being ready for `kStable` or longer is
// retried at once instead (it is not "flapping").
//
// Thread-compatible.
#ifndef DLOCK_TRANSPORT_UV_RECONNECT_BACKOFF_H_
#define DLOCK_TRANSPORT_UV_RECONNECT_BACKOFF_H_

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace dlock {

class ReconnectBackoff {
 public:
  static constexpr absl::Duration kStable = absl::Seconds(1);

  // The options as validated by ValidateConnectionOptions.
  ReconnectBackoff(absl::Duration min, absl::Duration max, double jitter)
      : min_(min), max_(max), jitter_(jitter) {}

  // The pause before the next attempt after `failures` (>= 1) failures.
  absl::Duration Delay(int failures);

 private:
  const absl::Duration min_;
  const absl::Duration max_;
  const double jitter_;
  absl::BitGen rng_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_RECONNECT_BACKOFF_H_
