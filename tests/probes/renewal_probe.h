// This header defines what the renewal probes (peer_bugs_real_test,
// sentinel_probe_test) watch a watchdog with: `RenewalCounter`, its
// renewals by outcome; `CountRenewals`, watchdog options that report to
// one; and `RecordLoss`, watch options whose on_lost records the loss.
#ifndef DLOCK_TESTS_PROBES_RENEWAL_PROBE_H_
#define DLOCK_TESTS_PROBES_RENEWAL_PROBE_H_

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/observer.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace test_support {

class RenewalCounter : public LockObserver {
 public:
  void OnRenewal(const RenewalEvent& e) override {
    if (e.status.ok()) {
      ++ok;
    } else {
      ++failed;
    }
  }
  int ok = 0;
  int failed = 0;
};

// Watchdog options whose renewals `counter` counts.
inline WatchdogOptions CountRenewals(RenewalCounter* counter) {
  WatchdogOptions options;
  options.observer = counter;
  return options;
}

// Watch options whose on_lost sets `*lost` and keeps the reason in `*why`;
// renewed every `renew_interval` when given (else the watchdog's default).
inline WatchOptions RecordLoss(bool* lost, absl::Status* why,
                               std::optional<absl::Duration> renew_interval = std::nullopt) {
  WatchOptions w;
  if (renew_interval.has_value()) w.renew_interval = *renew_interval;
  w.on_lost = [lost, why](absl::Status s) {
    *lost = true;
    *why = std::move(s);
  };
  return w;
}

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_PROBES_RENEWAL_PROBE_H_
