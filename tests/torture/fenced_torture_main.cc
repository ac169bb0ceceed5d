// Runs the fenced torture scenario (fenced_torture.h) on each protected
// store (--stores: PostgreSQL, a second Redis) with fencing on, with only
// the writes fenced (the reads not), and off, and prints the Markdown
// table of docs/fencing-torture.md. Exits 0 when full fencing lost no update
// and the run without fencing lost some, on every store.
//
//   bazel run //tests/torture:fenced_torture_main -- --seconds=60 --workers=6
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/fenced_torture.h"

ABSL_FLAG(int, seconds, 30, "duration of each run");
ABSL_FLAG(std::string, stores, "postgres,redis",
          "comma-separated protected stores to run: postgres, redis");
ABSL_FLAG(int, workers, 4, "worker processes");
ABSL_FLAG(int, ttl_ms, 300, "lease TTL");
ABSL_FLAG(std::string, worker, "", "fenced_worker binary (default: beside this one)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::string worker = absl::GetFlag(FLAGS_worker);
  if (worker.empty()) {
    char self[PATH_MAX] = {0};
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string dir = n > 0 ? std::string(self, n) : std::string(argv[0]);
    worker = dir.substr(0, dir.rfind('/')) + "/fenced_worker";
  }
  std::vector<dlock::torture::FencedStoreKind> stores;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_stores), ',',
                                               absl::SkipEmpty())) {
    if (name == "postgres") {
      stores.push_back(dlock::torture::FencedStoreKind::kPostgres);
    } else if (name == "redis") {
      stores.push_back(dlock::torture::FencedStoreKind::kRedis);
    } else {
      fprintf(stderr, "bad --stores: %s\n", std::string(name).c_str());
      return 2;
    }
  }
  printf("| store | fencing | workers | seconds | TTL | pauses past TTL | kill -9 | increments applied "
         "| counter | lost updates | stale writes refused |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  for (dlock::torture::FencedStoreKind store : stores) {
  for (int mode : {0, 1, 2}) {
    const bool fencing = mode != 2;
    dlock::torture::FencedTortureOptions o;
    o.worker_path = worker;
    o.store = store;
    o.workers = absl::GetFlag(FLAGS_workers);
    o.duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
    o.ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
    o.fencing = fencing;
    o.fence_reads = mode == 0;
    auto r = dlock::torture::RunFencedTorture(o);
    if (!r.ok()) {
      fprintf(stderr, "run failed: %s\n", r.status().ToString().c_str());
      return 2;
    }
    printf("%s\n", dlock::torture::FencedTortureRow(o, *r).c_str());
    fflush(stdout);
    if (mode == 0) ok = ok && r->lost_updates == 0;
    if (mode == 2) ok = ok && r->lost_updates > 0;
  }
  }
  return ok ? 0 : 1;
}
