#include "dlock/metrics/metric_families.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace metrics_internal {

absl::StatusOr<std::unique_ptr<MetricFamilies>> RegisterMetricFamilies(
    prometheus::Registry& registry, const std::map<std::string, std::string>& constant) {
  auto families = std::make_unique<MetricFamilies>();
  try {
    families->acquire = &prometheus::BuildCounter()
                             .Name("dlock_acquire_total")
                             .Help("dlock Acquire calls that called back, by policy and outcome")
                             .Labels(constant)
                             .Register(registry);
    families->acquire_latency =
        &prometheus::BuildHistogram()
             .Name("dlock_acquire_latency_seconds")
             .Help("Time from an Acquire call to its outcome, by policy and outcome")
             .Labels(constant)
             .Register(registry);
    families->acquire_wait =
        &prometheus::BuildHistogram()
             .Name("dlock_acquire_wait_seconds")
             .Help("Part of an Acquire's latency spent waiting between attempts")
             .Labels(constant)
             .Register(registry);
    families->retries =
        &prometheus::BuildCounter()
             .Name("dlock_acquire_retries_total")
             .Help("Failed Acquire attempts a retrying policy will retry, by the attempt's error")
             .Labels(constant)
             .Register(registry);
    families->release = &prometheus::BuildCounter()
                             .Name("dlock_release_total")
                             .Help("dlock Release calls that called back, by policy and outcome")
                             .Labels(constant)
                             .Register(registry);
    families->extend = &prometheus::BuildCounter()
                            .Name("dlock_extend_total")
                            .Help("dlock Extend calls that called back, by policy and outcome")
                            .Labels(constant)
                            .Register(registry);
    families->renewal = &prometheus::BuildCounter()
                             .Name("dlock_renewal_total")
                             .Help("Watchdog lease renewals, by outcome")
                             .Labels(constant)
                             .Register(registry);
    families->margin =
        &prometheus::BuildHistogram()
             .Name("dlock_renewal_margin_seconds")
             .Help("Time left until the lease's local deadline when a renewal was sent")
             .Labels(constant)
             .Register(registry);
    families->lost = &prometheus::BuildCounter()
                          .Name("dlock_leases_lost_total")
                          .Help("Leases the Watchdog gave up, by why")
                          .Labels(constant)
                          .Register(registry);
    families->held =
        &prometheus::BuildGauge()
             .Name("dlock_leases_held")
             .Help("Best-effort count of leases held: acquired ok - released ok - lost")
             .Labels(constant)
             .Register(registry);
    families->votes = &prometheus::BuildCounter()
                           .Name("dlock_redlock_votes_total")
                           .Help("RedLock per-server answers, by operation, server and outcome")
                           .Labels(constant)
                           .Register(registry);
    families->late_grants =
        &prometheus::BuildCounter()
             .Name("dlock_late_grants_released_total")
             .Help("Grants that arrived when nobody could use them and were released again, "
                   "by policy, operation and reason")
             .Labels(constant)
             .Register(registry);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrometheusLockObserver: cannot register metrics: ", e.what()));
  }
  return families;
}

}  // namespace metrics_internal
}  // namespace dlock
