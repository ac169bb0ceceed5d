// This header defines the measurement helpers shared by dlock's benchmarks:
// a latency recorder, a CPU/RSS snapshot (getrusage), a wall clock, and
// `BenchResult`, printed as exactly one JSON line.
//
// Benchmarks measure; they never assert timings. Wall-clock and latency
// measurement here reads std::chrono::steady_clock directly: it is
// measurement, not lease arithmetic (which goes through EventLoop::Now()).
//
// This file is thread-compatible.
#ifndef DLOCK_BENCH_BENCH_UTIL_H_
#define DLOCK_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock {
namespace bench {

// Monotonic nanoseconds (steady_clock).
inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Process CPU time (user + system) in microseconds, and peak RSS in KiB.
struct Usage {
  int64_t cpu_us = 0;
  int64_t peak_rss_kb = 0;
  // Allocation counters (see alloc_count.h): malloc-family calls and
  // operator new calls so far, process-wide.
  uint64_t mallocs = 0;
  uint64_t news = 0;
  static Usage Now();
};

// Collects per-cycle latencies (ns) and reports percentiles.
class LatencyRecorder {
 public:
  void Reserve(size_t n) { ns_.reserve(n); }
  void Add(int64_t ns) { ns_.push_back(ns); }
  size_t size() const { return ns_.size(); }
  // The q-quantile (0 <= q <= 1) in microseconds (nearest rank); 0 if empty.
  double PercentileUs(double q);
  // Samples above `us` microseconds.
  int64_t CountAboveUs(double us) const;

 private:
  std::vector<int64_t> ns_;
  bool sorted_ = false;
};

// One benchmark run. Fields left unset are omitted from the JSON line.
struct BenchResult {
  std::string peer;      // "dlock-async", "dlock-blocking", "hiredis-raw"
  std::string api;       // "async", "blocking", "sync"
  std::string workload;  // "seq", "pipelined", "contend", "watchdog"
  int instances = 1;
  // Ordered extra fields, already rendered as JSON values.
  std::vector<std::pair<std::string, std::string>> fields;

  void Set(const std::string& name, int64_t v);
  void Set(const std::string& name, double v);
  void Set(const std::string& name, bool v);
  void SetString(const std::string& name, const std::string& v);

  // Sets n, wall_s, cycles_per_s, client_cpu_us_per_cycle, peak_rss_kb,
  // allocs_per_cycle (malloc-family calls, operator new included),
  // news_per_cycle, and p50_us/p99_us/p999_us/max_us/cycles_over_1ms from
  // `lat` when it holds samples.
  void SetCycleStats(int64_t n, int64_t wall_ns, const Usage& before,
                     const Usage& after, LatencyRecorder* lat);

  // One line of JSON, no trailing newline.
  std::string ToJson() const;
};

// Prints `r.ToJson()` and a newline to stdout and flushes.
void PrintResult(const BenchResult& r);

// A run-unique key prefix, e.g. "bench:5f3a9c:" (pid and time based), so
// repeated runs against the same servers never collide.
std::string RunPrefix();

}  // namespace bench
}  // namespace dlock

#endif  // DLOCK_BENCH_BENCH_UTIL_H_
