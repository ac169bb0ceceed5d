#include "dlock/metrics/prometheus_observer.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/metrics/metric_families.h"
#include "prometheus/labels.h"

namespace dlock {
namespace {

using metrics_internal::MetricFamilies;
using metrics_internal::RegisterMetricFamilies;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

int CodeIndex(absl::StatusCode code) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= PrometheusLockObserver::kCodes) {
    return static_cast<int>(absl::StatusCode::kUnknown);
  }
  return c;
}

// Lower-case names of the status codes, indexed by code.
const std::array<std::string, PrometheusLockObserver::kCodes>& OutcomeNames() {
  static const auto* const kNames = [] {
    auto* names = new std::array<std::string, PrometheusLockObserver::kCodes>();
    for (int c = 0; c < PrometheusLockObserver::kCodes; ++c) {
      (*names)[c] =
          absl::AsciiStrToLower(absl::StatusCodeToString(static_cast<absl::StatusCode>(c)));
    }
    return names;
  }();
  return *kNames;
}

// Returns `*slot`, first creating it in `family` with the labels `make()`
// returns if null (so the labels are built only once per series). Call with
// the observer's mutex held.
template <typename T, typename MakeLabels, typename... Args>
T* GetOrAdd(T*& slot, Family<T>* family, MakeLabels make, Args&&... args) {
  if (slot == nullptr) slot = &family->Add(make(), std::forward<Args>(args)...);
  return slot;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

constexpr const char* kReservedLabels[] = {"policy", "outcome",        "op",
                                           "server", "resource_class", "le"};

}  // namespace

// Every series of one (policy, resource class); the policy-less families
// (renewal, margin, lost) use the entry of policy "".
struct PrometheusLockObserver::Series {
  prometheus::Labels policy_labels;  // policy [+ resource_class]
  prometheus::Labels plain_labels;   // [resource_class]
  bool wrapper = false;
  std::array<Counter*, kCodes> acquire{};
  std::array<Histogram*, kCodes> latency{};
  std::array<Histogram*, kCodes> wait{};
  std::array<Counter*, kCodes> retries{};
  std::array<Counter*, kCodes> release{};
  std::array<Counter*, kCodes> extend{};
  std::array<Counter*, kCodes> renewal{};
  std::array<Histogram*, kCodes> margin{};
  std::array<Counter*, kCodes> lost{};
};

absl::string_view PrometheusLockObserver::OutcomeLabel(absl::StatusCode code) {
  return OutcomeNames()[CodeIndex(code)];
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
      held_(&families_->held->Add({})) {}

PrometheusLockObserver::~PrometheusLockObserver() = default;

std::string PrometheusLockObserver::ClassOf(absl::string_view resource) const {
  if (!options_.resource_class) return std::string();
  return options_.resource_class(resource);
}

PrometheusLockObserver::Series* PrometheusLockObserver::SeriesFor(
    absl::string_view policy, absl::string_view resource_class) {
  auto outer = series_.find(policy);
  if (outer == series_.end()) {
    outer = series_.emplace(std::string(policy), decltype(outer->second)()).first;
  }
  auto inner = outer->second.find(resource_class);
  if (inner != outer->second.end()) return inner->second.get();
  auto series = std::make_unique<Series>();
  series->policy_labels = {{"policy", std::string(policy)}};
  if (options_.resource_class) {
    series->policy_labels.emplace("resource_class", std::string(resource_class));
    series->plain_labels.emplace("resource_class", std::string(resource_class));
  }
  series->wrapper = std::find(options_.wrapper_policies.begin(), options_.wrapper_policies.end(),
                              policy) != options_.wrapper_policies.end();
  Series* raw = series.get();
  outer->second.emplace(std::string(resource_class), std::move(series));
  return raw;
}

namespace {

prometheus::Labels With(prometheus::Labels labels, int code) {
  labels.emplace("outcome", OutcomeNames()[code]);
  return labels;
}

}  // namespace

void PrometheusLockObserver::OnAcquire(const AcquireEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.status.code());
  Counter* total;
  Histogram* latency;
  Histogram* wait;
  bool wrapper;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor(event.policy, cls);
    total = GetOrAdd(s->acquire[code], families_->acquire,
                     [&] { return With(s->policy_labels, code); });
    latency = GetOrAdd(
        s->latency[code], families_->acquire_latency, [&] { return With(s->policy_labels, code); },
        options_.latency_buckets);
    wait = GetOrAdd(
        s->wait[code], families_->acquire_wait, [&] { return With(s->policy_labels, code); },
        options_.wait_buckets);
    wrapper = s->wrapper;
  }
  total->Increment();
  latency->Observe(Seconds(event.latency));
  wait->Observe(Seconds(event.waited));
  if (event.status.ok() && !wrapper) held_->Increment();
}

void PrometheusLockObserver::OnAcquireWait(const AcquireWaitEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.last_error.code());
  Counter* retries;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor(event.policy, cls);
    retries = GetOrAdd(s->retries[code], families_->retries,
                       [&] { return With(s->policy_labels, code); });
  }
  retries->Increment();
}

void PrometheusLockObserver::OnRelease(const ReleaseEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.status.code());
  Counter* total;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor(event.policy, cls);
    total = GetOrAdd(s->release[code], families_->release,
                     [&] { return With(s->policy_labels, code); });
  }
  total->Increment();
  if (event.status.ok()) held_->Decrement();
}

void PrometheusLockObserver::OnExtend(const ExtendEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.status.code());
  Counter* total;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor(event.policy, cls);
    total =
        GetOrAdd(s->extend[code], families_->extend, [&] { return With(s->policy_labels, code); });
  }
  total->Increment();
}

void PrometheusLockObserver::OnRenewal(const RenewalEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.status.code());
  Counter* total;
  Histogram* margin;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor("", cls);
    total =
        GetOrAdd(s->renewal[code], families_->renewal, [&] { return With(s->plain_labels, code); });
    margin = GetOrAdd(
        s->margin[code], families_->margin, [&] { return With(s->plain_labels, code); },
        options_.margin_buckets);
  }
  total->Increment();
  margin->Observe(Seconds(event.margin));
}

void PrometheusLockObserver::OnLeaseLost(const LeaseLostEvent& event) {
  const std::string cls = ClassOf(event.resource);
  const int code = CodeIndex(event.status.code());
  Counter* lost;
  {
    MutexLock lock(&mu_);
    Series* s = SeriesFor("", cls);
    lost = GetOrAdd(s->lost[code], families_->lost, [&] { return With(s->plain_labels, code); });
  }
  lost->Increment();
  held_->Decrement();
}

void PrometheusLockObserver::OnServerVote(const ServerVoteEvent& event) {
  // A short index fits std::string's inline buffer: no allocation.
  const std::string server =
      event.server_name.empty() ? std::to_string(event.server) : std::string();
  const absl::string_view server_label =
      event.server_name.empty() ? absl::string_view(server) : event.server_name;
  const int code = CodeIndex(event.status.code());
  Counter* votes;
  {
    MutexLock lock(&mu_);
    auto outer = votes_.find(event.operation);
    if (outer == votes_.end()) {
      outer = votes_.emplace(std::string(event.operation), decltype(outer->second)()).first;
    }
    auto inner = outer->second.find(server_label);
    if (inner == outer->second.end()) {
      inner =
          outer->second.emplace(std::string(server_label), std::make_unique<VoteSeries>()).first;
      inner->second->fill(nullptr);
    }
    votes = GetOrAdd((*inner->second)[code], families_->votes, [&] {
      return prometheus::Labels{{"op", std::string(event.operation)},
                                {"server", std::string(server_label)},
                                {"outcome", OutcomeNames()[code]}};
    });
  }
  votes->Increment();
}

}  // namespace dlock
