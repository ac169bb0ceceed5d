#include "dlock/metrics/prometheus_observer.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/metrics/metric_families.h"
#include "dlock/metrics/series_cache.h"

namespace dlock {
namespace {

using metrics_internal::CodeIndex;
using metrics_internal::MetricFamilies;
using metrics_internal::RegisterMetricFamilies;
using metrics_internal::SeriesCache;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

constexpr const char* kReservedLabels[] = {"policy",         "outcome", "op",    "server",
                                           "resource_class", "le",      "reason"};

}  // namespace

absl::string_view PrometheusLockObserver::OutcomeLabel(absl::StatusCode code) {
  return metrics_internal::OutcomeName(CodeIndex(code));
}

absl::StatusOr<std::unique_ptr<PrometheusLockObserver>> PrometheusLockObserver::Create(
    std::shared_ptr<prometheus::Registry> registry, Options options) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("PrometheusLockObserver: null registry");
  }
  for (const auto& [name, value] : options.constant_labels) {
    for (const char* reserved : kReservedLabels) {
      if (name == reserved) {
        return absl::InvalidArgumentError(
            absl::StrCat("PrometheusLockObserver: constant label \"", name,
                         "\" is one of the labels the observer sets"));
      }
    }
  }
  for (const std::vector<double>* b :
       {&options.latency_buckets, &options.wait_buckets, &options.margin_buckets}) {
    if (std::adjacent_find(b->begin(), b->end(), std::greater_equal<double>()) != b->end()) {
      return absl::InvalidArgumentError(
          "PrometheusLockObserver: histogram buckets must be strictly ascending");
    }
  }
  absl::StatusOr<std::unique_ptr<MetricFamilies>> families =
      RegisterMetricFamilies(*registry, options.constant_labels);
  if (!families.ok()) return families.status();
  return std::unique_ptr<PrometheusLockObserver>(
      new PrometheusLockObserver(std::move(registry), std::move(options), *std::move(families)));
}

PrometheusLockObserver::PrometheusLockObserver(std::shared_ptr<prometheus::Registry> registry,
                                               Options options,
                                               std::unique_ptr<MetricFamilies> families)
    : registry_(std::move(registry)),
      options_(std::move(options)),
      families_(std::move(families)),
      held_(&families_->held->Add({})),
      series_(std::make_unique<SeriesCache>(*families_, options_)) {}

PrometheusLockObserver::~PrometheusLockObserver() = default;

std::string PrometheusLockObserver::ClassOf(absl::string_view resource) const {
  if (!options_.resource_class) return std::string();
  return options_.resource_class(resource);
}

void PrometheusLockObserver::OnAcquire(const AcquireEvent& event) {
  const SeriesCache::Acquire s =
      series_->AcquireSeries(event.policy, ClassOf(event.resource), CodeIndex(event.status.code()));
  s.total->Increment();
  s.latency->Observe(Seconds(event.latency));
  s.wait->Observe(Seconds(event.waited));
  if (event.status.ok() && !s.wrapper) held_->Increment();
}

void PrometheusLockObserver::OnAcquireWait(const AcquireWaitEvent& event) {
  series_->RetriesSeries(event.policy, ClassOf(event.resource), CodeIndex(event.last_error.code()))
      ->Increment();
}

void PrometheusLockObserver::OnRelease(const ReleaseEvent& event) {
  series_->ReleaseSeries(event.policy, ClassOf(event.resource), CodeIndex(event.status.code()))
      ->Increment();
  if (event.status.ok()) held_->Decrement();
}

void PrometheusLockObserver::OnExtend(const ExtendEvent& event) {
  series_->ExtendSeries(event.policy, ClassOf(event.resource), CodeIndex(event.status.code()))
      ->Increment();
}

void PrometheusLockObserver::OnRenewal(const RenewalEvent& event) {
  const SeriesCache::Renewal s =
      series_->RenewalSeries(ClassOf(event.resource), CodeIndex(event.status.code()));
  s.total->Increment();
  s.margin->Observe(Seconds(event.margin));
}

void PrometheusLockObserver::OnLeaseLost(const LeaseLostEvent& event) {
  series_->LostSeries(ClassOf(event.resource), CodeIndex(event.status.code()))->Increment();
  held_->Decrement();
}

void PrometheusLockObserver::OnServerVote(const ServerVoteEvent& event) {
  // A short index fits std::string's inline buffer: no allocation.
  const std::string server =
      event.server_name.empty() ? std::to_string(event.server) : std::string();
  const absl::string_view server_label =
      event.server_name.empty() ? absl::string_view(server) : event.server_name;
  series_->VoteSeries(event.operation, server_label, CodeIndex(event.status.code()))->Increment();
}

void PrometheusLockObserver::OnLateGrant(const LateGrantEvent& event) {
  series_->LateGrantSeries(event.policy, ClassOf(event.resource), event.operation, event.reason)
      ->Increment();
}

}  // namespace dlock
