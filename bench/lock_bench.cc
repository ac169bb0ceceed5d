// lock_bench: measures dlock's lock cycles against raw hiredis ceilings.
//
// Talks to Redis servers it is given (it never starts them) and prints
// exactly one JSON line per run on stdout. See bench/README section in
// bench/RESULTS.md and `bench/run`, which starts pinned servers and runs the
// whole matrix.
//
//   lock_bench --ports 7001 --peer dlock --api async --workload seq --n 20000
//   lock_bench --ports 7001,7002,7003 --peer hiredis-raw --workload seq
//   lock_bench --ports 7001 --peer dlock --api blocking --workload contend
//              --workers 4 --total 2000
//   lock_bench --ports 7001 --peer dlock --workload contend --clients 4
//              --total 2000      (4 separate clients, each its own RetryLock)
//   lock_bench --ports 7001 --peer dlock --workload contend --clients 4
//              --policy fair     (... each its own FairLock)
//   lock_bench --ports 7001 --peer dlock --workload watchdog --leases 10000
//              --seconds 10
//
// Peers: `dlock` (api async|blocking) and `hiredis-raw` (api sync|async).
// Workloads: seq, pipelined (--depth), contend (--workers, --total),
// watchdog (dlock only: --leases, --seconds). With several ports, dlock uses
// RedLock and the raw peer a parallel quorum.
//
// Benchmarks measure; nothing here asserts a timing. Exit status: 0 when the
// run completed (even if mutex_ok is false: that is a measurement), 1 on a
// connection or argument error (message on stderr).
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "dlock/bench/bench_util.h"
#include "dlock/bench/dlock_workloads.h"
#include "dlock/bench/raw_hiredis.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Redis host of every port");
ABSL_FLAG(std::string, ports, "6379", "comma-separated Redis ports");
ABSL_FLAG(std::string, peer, "dlock", "dlock | hiredis-raw");
ABSL_FLAG(std::string, api, "async", "dlock: async|blocking; hiredis-raw: sync|async");
ABSL_FLAG(std::string, workload, "seq", "seq | pipelined | contend | watchdog");
ABSL_FLAG(int64_t, n, 10000, "seq/pipelined: measured cycles");
ABSL_FLAG(int64_t, warmup, 500, "seq/pipelined: unmeasured cycles first");
ABSL_FLAG(int, depth, 16, "pipelined: chains in flight");
ABSL_FLAG(int, workers, 4, "contend: workers (threads or tasks)");
ABSL_FLAG(int, clients, 0,
          "contend: separate clients, each with its own connection(s) and lock "
          "(dlock: its own RetryLock; hiredis-raw: same as --workers)");
ABSL_FLAG(int64_t, total, 2000, "contend: critical sections in all");
ABSL_FLAG(int, wake_stagger_us, 0,
          "contend, dlock async, policy retry: RetryLockOptions::wake_stagger (us)");
ABSL_FLAG(std::string, policy, "retry",
          "contend, dlock async: retry (RetryLock over SimpleLock) | fair (FairLock)");
ABSL_FLAG(int, retry_ms, 1, "contend, hiredis-raw: sleep between attempts");
ABSL_FLAG(int64_t, leases, 10000, "watchdog: leases held");
ABSL_FLAG(double, seconds, 10, "watchdog: how long to hold them");
ABSL_FLAG(int, ttl_ms, 30000, "lock TTL (watchdog: lease TTL)");
ABSL_FLAG(int, min_replicas, 0,
          "dlock, one port, async seq/pipelined: replica acknowledgement "
          "(WAIT N behind every grant); the port must be a master with replicas");
ABSL_FLAG(bool, fencing, true,
          "dlock, async seq/pipelined: fencing tokens (off: SET NX PX alone, fence 0)");
ABSL_FLAG(bool, redlock_delayed_restart, true,
          "dlock with several ports: RedLock's delayed-restart rule");
ABSL_FLAG(bool, redlock_info_every_command, false,
          "dlock with several ports: check run_ids with an INFO on every acquire "
          "(RedLockOptions::check_run_id_every_command) instead of once per connection");
ABSL_FLAG(bool, raw_at_quorum, false,
          "hiredis-raw async over several ports: next phase once a majority "
          "answered (the RedLock ceiling); otherwise wait for every server");
ABSL_FLAG(bool, dlock_scripts, false,
          "hiredis-raw sync seq, async seq/pipelined: run dlock's acquire/release Lua scripts");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::vector<int> ports;
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_ports), ',')) {
    int port;
    if (!absl::SimpleAtoi(p, &port) || port <= 0 || port > 65535) {
      std::fprintf(stderr, "bad --ports entry '%s'\n", std::string(p).c_str());
      return 1;
    }
    ports.push_back(port);
  }
  const std::string peer = absl::GetFlag(FLAGS_peer);
  const std::string api = absl::GetFlag(FLAGS_api);
  const std::string workload = absl::GetFlag(FLAGS_workload);

  dlock::bench::RawOptions o;
  o.host = absl::GetFlag(FLAGS_host);
  o.ports = ports;
  o.prefix = dlock::bench::RunPrefix();
  o.n = absl::GetFlag(FLAGS_n);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.depth = absl::GetFlag(FLAGS_depth);
  o.workers = absl::GetFlag(FLAGS_workers);
  const int clients = absl::GetFlag(FLAGS_clients);
  if (clients < 0) {
    std::fprintf(stderr, "--clients must be >= 0\n");
    return 1;
  }
  if (clients > 0 && peer == "hiredis-raw") o.workers = clients;
  o.total = absl::GetFlag(FLAGS_total);
  o.ttl_ms = absl::GetFlag(FLAGS_ttl_ms);
  o.retry_ms = absl::GetFlag(FLAGS_retry_ms);
  o.dlock_scripts = absl::GetFlag(FLAGS_dlock_scripts);
  o.at_quorum = absl::GetFlag(FLAGS_raw_at_quorum);
  if (o.n <= 0 || o.warmup < 0 || o.depth <= 0 || o.workers <= 0 || o.total <= 0 ||
      o.ttl_ms <= 0 || o.retry_ms < 0) {
    std::fprintf(stderr, "counts and ttl must be positive\n");
    return 1;
  }

  absl::StatusOr<dlock::bench::BenchResult> r =
      absl::InvalidArgumentError("unknown --peer/--api/--workload combination");
  if (peer == "hiredis-raw") {
    if (workload == "seq" && api == "sync") {
      r = dlock::bench::RawSyncSeq(o);
    } else if ((workload == "seq" || workload == "pipelined") && api == "async") {
      r = dlock::bench::RawAsyncCycles(o, workload);
    } else if (workload == "contend" && api == "sync") {
      r = dlock::bench::RawSyncContend(o);
    } else if (workload == "contend" && api == "async") {
      r = dlock::bench::RawAsyncContend(o);
    }
  } else if (peer == "dlock") {
    dlock::bench::DlockOptions d;
    d.raw = o;
    d.api = api;
    d.leases = absl::GetFlag(FLAGS_leases);
    d.clients = clients;
    d.policy = absl::GetFlag(FLAGS_policy);
    d.wake_stagger = absl::Microseconds(absl::GetFlag(FLAGS_wake_stagger_us));
    d.seconds = absl::GetFlag(FLAGS_seconds);
    d.redlock_delayed_restart = absl::GetFlag(FLAGS_redlock_delayed_restart);
    d.fencing = absl::GetFlag(FLAGS_fencing);
    d.redlock_info_every_command = absl::GetFlag(FLAGS_redlock_info_every_command);
    d.min_replicas = absl::GetFlag(FLAGS_min_replicas);
    r = dlock::bench::RunDlock(d, workload);
  }
  if (!r.ok()) {
    std::fprintf(stderr, "lock_bench: %s\n", r.status().ToString().c_str());
    return 1;
  }
  dlock::bench::PrintResult(*r);
  return 0;
}
