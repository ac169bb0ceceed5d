// torture_main: the long torture run (bench/torture --minutes M). Runs every
// standard scenario (torture_driver.h) for its share of the time, prints
// one result line per scenario as it finishes and then a markdown table.
//
//   torture_main --minutes 10 --worker <path to torture_worker>
//   torture_main --primitives --minutes 4 --primitive_worker <path>
//     issue 16's primitives under faults (primitive_driver.h); exits 1 on
//     any invariant violation.
//   torture_main --network --minutes 5 --worker <path>
//     faults on the network between workers and lock servers
//     (network_driver.h); exits 1 on an overlap, a lost update or a ghost
//     key. Partition scenarios need root (network namespaces); without,
//     each says why and is counted as skipped.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/network_driver.h"
#include "dlock/tests/torture/primitive_driver.h"
#include "dlock/tests/torture/torture_driver.h"

ABSL_FLAG(double, minutes, 5, "total duration, spread over the scenarios");
ABSL_FLAG(std::string, worker, "tests/torture/torture_worker", "torture_worker binary");
ABSL_FLAG(int, workers, 3, "worker processes per scenario");
ABSL_FLAG(std::string, only, "", "run only scenarios whose name contains this");
ABSL_FLAG(bool, primitives, false,
          "run issue 16's primitives (read-write lock, semaphore, fair lock, multi-lock; "
          "primitive_driver.h) under pauses, kills and restarts instead of the standard "
          "scenarios");
ABSL_FLAG(std::string, primitive_worker, "tests/torture/primitive_worker",
          "primitive_worker binary (--primitives)");
ABSL_FLAG(bool, network, false,
          "run the network fault scenarios (NetworkScenarios: delays, stalls, resets, "
          "partitions) instead of the standard ones");
ABSL_FLAG(bool, sentinel, false,
          "run the Sentinel failover scenarios (SentinelScenarios) instead of the "
          "standard ones");

namespace {

// --primitives: every primitive scenario; fails when a run breaks an
// invariant (the table shows which).
int RunPrimitives(absl::Duration total) {
  std::vector<dlock::torture::PrimitiveResult> results;
  int failures = 0;
  for (auto spec : dlock::torture::PrimitiveScenarios(total)) {
    if (!absl::GetFlag(FLAGS_only).empty() &&
        spec.name.find(absl::GetFlag(FLAGS_only)) == std::string::npos) {
      continue;
    }
    std::fprintf(stderr, "torture: %s for %.0f s\n", spec.name.c_str(),
                 absl::ToDoubleSeconds(spec.duration));
    auto r = dlock::torture::RunPrimitiveScenario(spec, absl::GetFlag(FLAGS_primitive_worker));
    if (!r.ok()) {
      std::fprintf(stderr, "torture: %s failed: %s\n", spec.name.c_str(),
                   r.status().ToString().c_str());
      ++failures;
      continue;
    }
    for (const std::string& e : r->report.examples) {
      std::fprintf(stderr, "torture: %s: VIOLATION %s\n", spec.name.c_str(), e.c_str());
    }
    if (r->report.total_violations() > 0) ++failures;
    results.push_back(*r);
  }
  std::printf("%s", dlock::torture::FormatPrimitiveTable(results).c_str());
  return failures == 0 ? 0 : 1;
}

// --network: every network scenario; fails on an overlap, a lost update or
// a ghost key (the table shows which).
int RunNetwork(absl::Duration total) {
  std::vector<dlock::torture::NetScenarioResult> results;
  int failures = 0, skipped = 0;
  for (auto spec : dlock::torture::NetworkScenarios(total)) {
    if (!absl::GetFlag(FLAGS_only).empty() &&
        spec.name.find(absl::GetFlag(FLAGS_only)) == std::string::npos) {
      continue;
    }
    spec.workers = absl::GetFlag(FLAGS_workers);
    std::fprintf(stderr, "torture: %s for %.0f s\n", spec.name.c_str(),
                 absl::ToDoubleSeconds(spec.duration));
    auto r = dlock::torture::RunNetworkScenario(spec, absl::GetFlag(FLAGS_worker));
    if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
      std::fprintf(stderr, "torture: %s SKIPPED: %s\n", spec.name.c_str(),
                   std::string(r.status().message()).c_str());
      ++skipped;
      continue;
    }
    if (!r.ok()) {
      std::fprintf(stderr, "torture: %s failed: %s\n", spec.name.c_str(),
                   r.status().ToString().c_str());
      ++failures;
      continue;
    }
    for (const std::string& e : r->net.examples) {
      std::fprintf(stderr, "torture: %s: GHOST %s\n", spec.name.c_str(), e.c_str());
    }
    const auto& p = r->report;
    std::fprintf(stderr,
                 "torture: %s: faults %lld, granted %lld, overlaps %lld, lost %lld/%lld, "
                 "ghosts %lld (audits %lld), hand-over p50 %.1f ms p99 %.1f ms, master "
                 "changes %lld\n",
                 spec.name.c_str(), (long long)r->faults_injected, (long long)p.cs_attempted,
                 (long long)p.overlaps, (long long)p.lost_fenced, (long long)p.lost_unfenced,
                 (long long)r->net.ghosts(), (long long)r->net.audits, r->net.handover_p50_ms,
                 r->net.handover_p99_ms, (long long)r->master_changes);
    if (p.overlaps > 0 || p.lost_fenced > 0 || p.lost_unfenced > 0 || r->net.ghosts() > 0) {
      ++failures;
    }
    results.push_back(*r);
  }
  std::printf("%s", dlock::torture::FormatNetworkTable(results).c_str());
  if (skipped > 0) std::printf("\n%d scenario(s) SKIPPED (see stderr)\n", skipped);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Duration total = absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  if (absl::GetFlag(FLAGS_primitives)) return RunPrimitives(total);
  if (absl::GetFlag(FLAGS_network)) return RunNetwork(total);
  std::vector<dlock::torture::ScenarioSpec> specs =
      absl::GetFlag(FLAGS_sentinel) ? dlock::torture::SentinelScenarios(total)
                                    : dlock::torture::StandardScenarios(total);
  std::vector<dlock::torture::ScenarioResult> results;
  int failures = 0;
  for (auto spec : specs) {
    if (!absl::GetFlag(FLAGS_only).empty() &&
        spec.name.find(absl::GetFlag(FLAGS_only)) == std::string::npos) {
      continue;
    }
    spec.workers = absl::GetFlag(FLAGS_workers);
    std::fprintf(stderr, "torture: %s (%s) for %.0f s\n", spec.name.c_str(),
                 dlock::torture::FaultName(spec.fault), absl::ToDoubleSeconds(spec.duration));
    auto r = dlock::torture::RunScenario(spec, absl::GetFlag(FLAGS_worker));
    if (!r.ok()) {
      std::fprintf(stderr, "torture: %s failed: %s\n", spec.name.c_str(),
                   r.status().ToString().c_str());
      ++failures;
      continue;
    }
    const auto& p = r->report;
    std::fprintf(stderr,
                 "torture: %s: faults %lld, granted %lld, completed %lld, overlaps %lld, "
                 "stale rejected %lld, expired locally %lld, lost fenced %lld, lost unfenced "
                 "%lld\n",
                 spec.name.c_str(), (long long)r->faults_injected, (long long)p.cs_attempted,
                 (long long)p.cs_completed, (long long)p.overlaps, (long long)p.stale_rejected,
                 (long long)p.expired_locally, (long long)p.lost_fenced,
                 (long long)p.lost_unfenced);
    results.push_back(*r);
  }
  std::printf("%s", dlock::torture::FormatTable(results).c_str());
  return failures == 0 ? 0 : 1;
}
