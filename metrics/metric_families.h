// Internal to //metrics: the metric families PrometheusLockObserver records
// into: their names, help texts and constant labels, registered once in the
// caller's registry. Which series (labels) exist is the observer's business.
#ifndef DLOCK_METRICS_METRIC_FAMILIES_H_
#define DLOCK_METRICS_METRIC_FAMILIES_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace dlock {
namespace metrics_internal {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// Owned by the registry; valid while it lives.
struct MetricFamilies {
  Family<Counter>* acquire = nullptr;
  Family<Histogram>* acquire_latency = nullptr;
  Family<Histogram>* acquire_wait = nullptr;
  Family<Counter>* retries = nullptr;
  Family<Counter>* release = nullptr;
  Family<Counter>* extend = nullptr;
  Family<Counter>* renewal = nullptr;
  Family<Histogram>* margin = nullptr;
  Family<Counter>* lost = nullptr;
  Family<Gauge>* held = nullptr;
  Family<Counter>* votes = nullptr;
  Family<Counter>* late_grants = nullptr;
};

// Registers every dlock_* family in `registry` with `constant` labels.
// kInvalidArgument when the registry refuses one (e.g. a name already
// registered with other labels).
absl::StatusOr<std::unique_ptr<MetricFamilies>> RegisterMetricFamilies(
    prometheus::Registry& registry, const std::map<std::string, std::string>& constant);

}  // namespace metrics_internal
}  // namespace dlock

#endif  // DLOCK_METRICS_METRIC_FAMILIES_H_
