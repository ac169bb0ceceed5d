// Internal to //metrics (namespace metrics_internal): `SeriesCache`, the
// series PrometheusLockObserver records into -- one per label combination
// (policy or op, resource class or server, outcome), added to its family on
// first use and cached, so that an event costs one short locked lookup and
// the labels are built only once per series. Which event updates which
// series is the observer's business; the families are metric_families.h's.
//
// Thread-safe: every method may be called from any thread. The series
// returned are prometheus-cpp metrics (themselves thread-safe), owned by the
// registry and valid while it lives.
#ifndef DLOCK_METRICS_SERIES_CACHE_H_
#define DLOCK_METRICS_SERIES_CACHE_H_

#include <array>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dlock/metrics/metric_families.h"
#include "dlock/metrics/prometheus_observer.h"
#include "dlock/transport/mutex.h"

namespace dlock {
namespace metrics_internal {

inline constexpr int kCodes = PrometheusLockObserver::kCodes;

// The index of `code` among the kCodes outcomes (kUnknown for a code
// outside them), and the outcome label of an index ("ok", "aborted", ...).
int CodeIndex(absl::StatusCode code);
const std::string& OutcomeName(int code);

class SeriesCache {
 public:
  // `families` and `options` must outlive the cache.
  SeriesCache(const MetricFamilies& families, const PrometheusObserverOptions& options);
  ~SeriesCache();
  SeriesCache(const SeriesCache&) = delete;
  SeriesCache& operator=(const SeriesCache&) = delete;

  // The series of the policy-labelled families for (policy, resource class
  // -- "" without Options::resource_class --, outcome index `code`).
  struct Acquire {
    Counter* total;
    Histogram* latency;
    Histogram* wait;
    bool wrapper;  // `policy` is one of Options::wrapper_policies
  };
  Acquire AcquireSeries(absl::string_view policy, absl::string_view cls, int code)
      ABSL_LOCKS_EXCLUDED(mu_);
  Counter* RetriesSeries(absl::string_view policy, absl::string_view cls, int code)
      ABSL_LOCKS_EXCLUDED(mu_);
  Counter* ReleaseSeries(absl::string_view policy, absl::string_view cls, int code)
      ABSL_LOCKS_EXCLUDED(mu_);
  Counter* ExtendSeries(absl::string_view policy, absl::string_view cls, int code)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The series of the Watchdog's families (no policy label).
  struct Renewal {
    Counter* total;
    Histogram* margin;
  };
  Renewal RenewalSeries(absl::string_view cls, int code) ABSL_LOCKS_EXCLUDED(mu_);
  Counter* LostSeries(absl::string_view cls, int code) ABSL_LOCKS_EXCLUDED(mu_);

  // dlock_redlock_votes_total{op, server, outcome}.
  Counter* VoteSeries(absl::string_view op, absl::string_view server, int code)
      ABSL_LOCKS_EXCLUDED(mu_);

  // dlock_late_grants_released_total{policy, [resource_class,] op, reason}.
  Counter* LateGrantSeries(absl::string_view policy, absl::string_view cls, absl::string_view op,
                           absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Series;
  using Votes = std::array<Counter*, kCodes>;

  // The cached series of one (policy or "", resource class) pair, created on
  // first use; stable address.
  Series* SeriesFor(absl::string_view policy, absl::string_view cls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MetricFamilies& families_;
  const PrometheusObserverOptions& options_;
  Mutex mu_;
  // Key: policy, then resource class ("" without resource_class).
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::unique_ptr<Series>>>
      series_ ABSL_GUARDED_BY(mu_);
  // Key: op, then server label.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::unique_ptr<Votes>>> votes_
      ABSL_GUARDED_BY(mu_);
  // Key: op and reason, NUL-separated (a rare event: built per event).
  using LateGrants = absl::flat_hash_map<std::string, Counter*>;
  // Per (policy, resource class) as series_; created on first use.
  absl::flat_hash_map<const Series*, LateGrants> late_grants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics_internal
}  // namespace dlock

#endif  // DLOCK_METRICS_SERIES_CACHE_H_
