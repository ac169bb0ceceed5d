#include "dlock/metrics/series_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prometheus/labels.h"

namespace dlock {
namespace metrics_internal {
namespace {

// Returns `*slot`, first creating it in `family` with the labels `make()`
// returns if null (so the labels are built only once per series). Call with
// the cache's mutex held.
template <typename T, typename MakeLabels, typename... Args>
T* GetOrAdd(T*& slot, Family<T>* family, MakeLabels make, Args&&... args) {
  if (slot == nullptr) slot = &family->Add(make(), std::forward<Args>(args)...);
  return slot;
}

prometheus::Labels With(prometheus::Labels labels, int code) {
  labels.emplace("outcome", OutcomeName(code));
  return labels;
}

}  // namespace

int CodeIndex(absl::StatusCode code) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kCodes) return static_cast<int>(absl::StatusCode::kUnknown);
  return c;
}

const std::string& OutcomeName(int code) {
  // Lower-case names of the status codes, indexed by code.
  static const auto* const kNames = [] {
    auto* names = new std::array<std::string, kCodes>();
    for (int c = 0; c < kCodes; ++c) {
      (*names)[c] =
          absl::AsciiStrToLower(absl::StatusCodeToString(static_cast<absl::StatusCode>(c)));
    }
    return names;
  }();
  return (*kNames)[code];
}

// Every series of one (policy, resource class); the policy-less families
// (renewal, margin, lost) use the entry of policy "".
struct SeriesCache::Series {
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

SeriesCache::SeriesCache(const MetricFamilies& families, const PrometheusObserverOptions& options)
    : families_(families), options_(options) {}

SeriesCache::~SeriesCache() = default;

SeriesCache::Series* SeriesCache::SeriesFor(absl::string_view policy,
                                            absl::string_view resource_class) {
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

SeriesCache::Acquire SeriesCache::AcquireSeries(absl::string_view policy, absl::string_view cls,
                                                int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor(policy, cls);
  auto labels = [&] { return With(s->policy_labels, code); };
  Acquire a;
  a.total = GetOrAdd(s->acquire[code], families_.acquire, labels);
  a.latency =
      GetOrAdd(s->latency[code], families_.acquire_latency, labels, options_.latency_buckets);
  a.wait = GetOrAdd(s->wait[code], families_.acquire_wait, labels, options_.wait_buckets);
  a.wrapper = s->wrapper;
  return a;
}

Counter* SeriesCache::RetriesSeries(absl::string_view policy, absl::string_view cls, int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor(policy, cls);
  return GetOrAdd(s->retries[code], families_.retries,
                  [&] { return With(s->policy_labels, code); });
}

Counter* SeriesCache::ReleaseSeries(absl::string_view policy, absl::string_view cls, int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor(policy, cls);
  return GetOrAdd(s->release[code], families_.release,
                  [&] { return With(s->policy_labels, code); });
}

Counter* SeriesCache::ExtendSeries(absl::string_view policy, absl::string_view cls, int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor(policy, cls);
  return GetOrAdd(s->extend[code], families_.extend, [&] { return With(s->policy_labels, code); });
}

SeriesCache::Renewal SeriesCache::RenewalSeries(absl::string_view cls, int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor("", cls);
  auto labels = [&] { return With(s->plain_labels, code); };
  Renewal r;
  r.total = GetOrAdd(s->renewal[code], families_.renewal, labels);
  r.margin = GetOrAdd(s->margin[code], families_.margin, labels, options_.margin_buckets);
  return r;
}

Counter* SeriesCache::LostSeries(absl::string_view cls, int code) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor("", cls);
  return GetOrAdd(s->lost[code], families_.lost, [&] { return With(s->plain_labels, code); });
}

Counter* SeriesCache::VoteSeries(absl::string_view op, absl::string_view server, int code) {
  MutexLock lock(&mu_);
  auto outer = votes_.find(op);
  if (outer == votes_.end()) {
    outer = votes_.emplace(std::string(op), decltype(outer->second)()).first;
  }
  auto inner = outer->second.find(server);
  if (inner == outer->second.end()) {
    inner = outer->second.emplace(std::string(server), std::make_unique<Votes>()).first;
    inner->second->fill(nullptr);
  }
  return GetOrAdd((*inner->second)[code], families_.votes, [&] {
    return prometheus::Labels{
        {"op", std::string(op)}, {"server", std::string(server)}, {"outcome", OutcomeName(code)}};
  });
}

Counter* SeriesCache::LateGrantSeries(absl::string_view policy, absl::string_view cls,
                                      absl::string_view op, absl::string_view reason) {
  MutexLock lock(&mu_);
  Series* s = SeriesFor(policy, cls);
  std::string key = absl::StrCat(op, absl::string_view("\0", 1), reason);
  Counter*& slot = late_grants_[s][key];
  return GetOrAdd(slot, families_.late_grants, [&] {
    prometheus::Labels labels = s->policy_labels;
    labels.emplace("op", std::string(op));
    labels.emplace("reason", std::string(reason));
    return labels;
  });
}

}  // namespace metrics_internal
}  // namespace dlock
