#include "dlock/bench/bench_util.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/bench/alloc_count.h"

namespace dlock {
namespace bench {

Usage Usage::Now() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.cpu_us = static_cast<int64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
             ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
  u.peak_rss_kb = ru.ru_maxrss;  // KiB on Linux
  AllocCounts a = CurrentAllocCounts();
  u.mallocs = a.mallocs;
  u.news = a.news;
  return u;
}

double LatencyRecorder::PercentileUs(double q) {
  if (ns_.empty()) return 0;
  if (!sorted_) {
    std::sort(ns_.begin(), ns_.end());
    sorted_ = true;
  }
  size_t rank = static_cast<size_t>(std::ceil(q * ns_.size()));
  if (rank > 0) --rank;
  if (rank >= ns_.size()) rank = ns_.size() - 1;
  return ns_[rank] / 1000.0;
}

int64_t LatencyRecorder::CountAboveUs(double us) const {
  int64_t n = 0;
  for (int64_t ns : ns_) n += ns > us * 1000.0 ? 1 : 0;
  return n;
}

void BenchResult::Set(const std::string& name, int64_t v) {
  fields.emplace_back(name, absl::StrCat(v));
}
void BenchResult::Set(const std::string& name, double v) {
  if (!std::isfinite(v)) {
    fields.emplace_back(name, "null");
    return;
  }
  fields.emplace_back(name, absl::StrFormat("%.6g", v));
}
void BenchResult::Set(const std::string& name, bool v) {
  fields.emplace_back(name, v ? "true" : "false");
}
void BenchResult::SetString(const std::string& name, const std::string& v) {
  // Names and values used here are plain ASCII without quotes or backslashes.
  fields.emplace_back(name, absl::StrCat("\"", v, "\""));
}

void BenchResult::SetCycleStats(int64_t n, int64_t wall_ns, const Usage& before,
                                const Usage& after, LatencyRecorder* lat) {
  double wall_s = wall_ns / 1e9;
  Set("n", n);
  Set("wall_s", wall_s);
  Set("cycles_per_s", wall_s > 0 ? n / wall_s : 0.0);
  if (lat != nullptr && lat->size() > 0) {
    Set("p50_us", lat->PercentileUs(0.50));
    Set("p99_us", lat->PercentileUs(0.99));
    Set("p999_us", lat->PercentileUs(0.999));
    Set("max_us", lat->PercentileUs(1.0));
    Set("cycles_over_1ms", lat->CountAboveUs(1000.0));
  }
  Set("client_cpu_us_per_cycle",
      n > 0 ? static_cast<double>(after.cpu_us - before.cpu_us) / n : 0.0);
  Set("peak_rss_kb", after.peak_rss_kb);
  if (n > 0) {
    Set("allocs_per_cycle", static_cast<double>(after.mallocs - before.mallocs) / n);
    Set("news_per_cycle", static_cast<double>(after.news - before.news) / n);
  }
}

std::string BenchResult::ToJson() const {
  std::string out = absl::StrCat("{\"peer\":\"", peer, "\",\"api\":\"", api,
                                 "\",\"workload\":\"", workload,
                                 "\",\"instances\":", instances);
  for (const auto& f : fields) absl::StrAppend(&out, ",\"", f.first, "\":", f.second);
  out += "}";
  return out;
}

void PrintResult(const BenchResult& r) {
  std::string line = r.ToJson();
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string RunPrefix() {
  return absl::StrFormat("bench:%x%x:", static_cast<unsigned>(getpid()),
                         static_cast<unsigned>(NowNanos() & 0xffffff));
}

}  // namespace bench
}  // namespace dlock
