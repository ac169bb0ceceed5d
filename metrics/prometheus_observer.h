// This header defines `PrometheusLockObserver`, a `LockObserver` (see
// dlock/lock/observer.h) that turns what dlock's lock policies, Watchdog
// and RedLock report into Prometheus metrics, on prometheus-cpp 1.0.1.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   absl::StatusOr<std::unique_ptr<PrometheusLockObserver>> metrics =
//       PrometheusLockObserver::Create(registry);
//   SimpleLockOptions o;
//   o.observer = metrics->get();           // and RetryLock, Watchdog, RedLock
//   prometheus::Exposer exposer("127.0.0.1:9464");
//   exposer.RegisterCollectable(registry); // your service's own exposer
//
// The observer registers its metric families into the caller's registry and
// never serves anything itself: the service exposes the registry as it
// likes (prometheus::Exposer from prometheus-cpp-pull, a push gateway, its
// own HTTP server). //metrics depends on prometheus-cpp-core only.
//
// METRICS (all names start with "dlock_"; durations are in seconds, measured
// on the component's EventLoop clock; every metric also carries the
// `constant_labels` of the options):
//
//   dlock_acquire_total            counter    labels: policy, outcome
//       Acquire calls that called back (one per Acquire, not per attempt,
//       except that a wrapped lock reports its own attempts, see below).
//   dlock_acquire_latency_seconds  histogram  labels: policy, outcome
//       Time from the Acquire call to its outcome.
//   dlock_acquire_wait_seconds     histogram  labels: policy, outcome
//       Of that latency, the time spent waiting between attempts (always 0
//       for single-attempt policies: "simple", "reentrant").
//   dlock_acquire_retries_total    counter    labels: policy, outcome
//       A retrying policy (RetryLock, RedLock) will try again; outcome is
//       the failed attempt's error (OnAcquireWait).
//   dlock_release_total            counter    labels: policy, outcome
//       Release calls that called back.
//   dlock_extend_total             counter    labels: policy, outcome
//       Extend calls that called back (the Watchdog's renewals included).
//   dlock_renewal_total            counter    labels: outcome
//       Watchdog renewals that got an outcome.
//   dlock_renewal_margin_seconds   histogram  labels: outcome
//       Time left until the lease's local deadline when a renewal was sent
//       (small or shrinking: a stalled loop or a slow server).
//   dlock_leases_lost_total        counter    labels: outcome
//       Leases the Watchdog gave up; outcome is why (failed_precondition:
//       another owner or expired; deadline_exceeded: no renewal in time).
//   dlock_leases_held              gauge      labels: (constant only)
//       Best-effort count of leases held; see LEASES HELD below.
//   dlock_redlock_votes_total      counter    labels: op, server, outcome
//       One RedLock server's answer to one operation.
//   dlock_late_grants_released_total  counter labels: policy, op, reason
//       Grants that arrived when nobody could use them any more and were
//       released again (OnLateGrant; docs/late-grants.md). Not zero, but
//       steady or rising: releases racing acquires or extends (reason
//       "released"), slow servers ("lost"), waits or deadlines shorter
//       than the round trip ("cancelled", "expired").
//
// Label values:
//   policy   the reporter's policy name: "simple", "retry", "reentrant",
//            "redlock" (or a custom policy's name).
//   outcome  the absl::StatusCode name in lower case: "ok", "aborted"
//            (busy: held by another owner), "unavailable",
//            "deadline_exceeded", "failed_precondition" (not the owner any
//            more), "cancelled", "internal", ... (one of the 17 codes;
//            "unknown" for a code outside them).
//   op       "acquire", "extend", "release" or "fence" (RedLock's
//            write-back of the fencing counter); for late grants
//            "acquire" or "extend".
//   reason   why a late grant was not kept: "released", "lost",
//            "cancelled", "expired" (observer.h).
//   server   RedLockOptions::server_names[i] when configured (e.g.
//            "10.0.0.1:6379"), else the index "0", "1", ...
// With `Options::resource_class` set, the metrics labelled with `policy`
// and the renewal and lost-lease metrics also get a `resource_class` label.
//
// Cardinality is bounded by design: policies, ops and status codes are
// small fixed sets and servers are bounded by the RedLock configuration. A
// resource name is NEVER a label: resources are typically unbounded (order
// ids, user ids), and one series per resource would grow the registry and
// every scrape without limit. To break metrics down by resource, map each
// resource to one of a few classes with `Options::resource_class` (e.g. the
// part before the first '/'); the function must return a small set of
// values.
//
// A RetryLock reports its whole wait (policy "retry") and its inner lock
// reports each attempt under the inner policy (e.g. "simple"). Install the
// same observer on both: releases and extends through a RetryLock are
// reported by the inner lock only.
//
// LEASES HELD. dlock_leases_held is a best-effort count kept from events
// only: +1 for each successful Acquire (except of the policies in
// `Options::wrapper_policies`, "retry" by default, whose lease was already
// counted when their inner lock reported it), -1 for each successful
// Release, -1 for each lease the Watchdog reports lost. It is exact for
// leases that are released while held or watched by a Watchdog that gives
// them up. It cannot see a lease that simply expires on the server: a lease
// acquired without a Watchdog and never released, or released only after it
// expired (that Release fails with failed_precondition), stays counted. A
// lease that the Watchdog declared lost at its deadline and that the holder
// then still released successfully is subtracted twice. Watch it for trends
// and leaks, together with dlock_release_total{outcome="failed_precondition"},
// not as exact accounting. It is one gauge per observer (the Watchdog's
// events carry no policy).
//
// COST. Components that are given no observer report to
// NoopLockObserver(): one virtual call to an empty function per event, and
// dlock's libraries never link prometheus-cpp. With this observer
// installed, each event costs a short std::mutex-protected lookup of its
// cached series (created on first use of a label combination) and the
// metric updates: measured (metrics/observer_bench.cc) at about 870
// instructions for OnAcquire (a counter and two histograms) and 430 for
// OnRelease, +2% instructions on a SimpleLock acquire + release on the
// in-memory fake, and much less against a real server's round trip.
//
// Threading: observer methods may be called concurrently from several loop
// threads (components on different loops may share one observer). The
// label cache is guarded by a std::mutex and prometheus-cpp's Counter,
// Gauge and Histogram are thread-safe, as is scraping the registry while
// events arrive. No method blocks on I/O.
//
// Lifetime: the observer keeps `registry` alive (shared_ptr) and must
// outlive every component it is installed in. Its families stay in the
// registry after it is destroyed. Two observers created on one registry
// with the same constant labels share the same series (prometheus-cpp's
// default Merge behaviour).
#ifndef DLOCK_METRICS_PROMETHEUS_OBSERVER_H_
#define DLOCK_METRICS_PROMETHEUS_OBSERVER_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace dlock {
namespace metrics_internal {
struct MetricFamilies;  // metric_families.h
class SeriesCache;      // series_cache.h
}  // namespace metrics_internal

// Options of PrometheusLockObserver (also PrometheusLockObserver::Options).
struct PrometheusObserverOptions {
  // Added to every series (e.g. {{"service", "billing"}}). Names must be
  // valid Prometheus label names and must not be one of the labels above.
  std::map<std::string, std::string> constant_labels;
  // Empty (default): no resource label at all. Otherwise called on the
  // reporting thread for each event that carries a resource; its result
  // becomes the `resource_class` label. It must return few distinct
  // values (see the header comment) and must be thread-safe.
  std::function<std::string(absl::string_view resource)> resource_class;
  // Policies whose successful acquires are not added to
  // dlock_leases_held because they wrap another reported lock.
  std::vector<std::string> wrapper_policies = {"retry"};
  // Histogram bucket upper bounds, in seconds (ascending). Defaults:
  // 0.5 ms .. 30 s for latencies, 1 ms .. 60 s for waits, 5 ms .. 60 s for
  // renewal margins.
  std::vector<double> latency_buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,   0.5,   1,      2.5,   5,    10,    30};
  std::vector<double> wait_buckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,   5,    10,   30,  60};
  std::vector<double> margin_buckets = {0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,   20,  30,   60};
};

class PrometheusLockObserver : public LockObserver {
 public:
  // Number of absl::StatusCode values (0..16); others count as kUnknown.
  static constexpr int kCodes = 17;

  using Options = PrometheusObserverOptions;

  // Registers the families into `registry`. kInvalidArgument for a null
  // registry, a bad constant label (invalid name, or one of the labels this
  // observer sets), unsorted buckets, or a family name already registered
  // in `registry` with another type or other constant labels.
  static absl::StatusOr<std::unique_ptr<PrometheusLockObserver>> Create(
      std::shared_ptr<prometheus::Registry> registry, Options options = Options());

  ~PrometheusLockObserver() override;
  PrometheusLockObserver(const PrometheusLockObserver&) = delete;
  PrometheusLockObserver& operator=(const PrometheusLockObserver&) = delete;

  void OnAcquire(const AcquireEvent& event) override;
  void OnAcquireWait(const AcquireWaitEvent& event) override;
  void OnRelease(const ReleaseEvent& event) override;
  void OnExtend(const ExtendEvent& event) override;
  void OnRenewal(const RenewalEvent& event) override;
  void OnLeaseLost(const LeaseLostEvent& event) override;
  void OnServerVote(const ServerVoteEvent& event) override;
  void OnLateGrant(const LateGrantEvent& event) override;

  // The lower-case outcome label of a status code ("ok", "aborted", ...).
  static absl::string_view OutcomeLabel(absl::StatusCode code);

 private:
  PrometheusLockObserver(std::shared_ptr<prometheus::Registry> registry, Options options,
                         std::unique_ptr<metrics_internal::MetricFamilies> families);

  // The resource class label of `resource` ("" without resource_class).
  std::string ClassOf(absl::string_view resource) const;

  const std::shared_ptr<prometheus::Registry> registry_;
  const Options options_;
  const std::unique_ptr<metrics_internal::MetricFamilies> families_;
  prometheus::Gauge* const held_;
  // The series of each label combination (thread-safe).
  const std::unique_ptr<metrics_internal::SeriesCache> series_;
};

}  // namespace dlock

#endif  // DLOCK_METRICS_PROMETHEUS_OBSERVER_H_
