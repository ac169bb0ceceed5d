// This header defines the torture run's NETWORK scenarios: the same worker
// processes, fenced register and overlap/fence checks as torture_driver.h,
// with the faults on the network between the workers and the lock servers
// instead of on processes (tests/netfault):
//
//   kDelay      every byte on the targeted links delayed by delay/2 +
//               uniform[0, jitter/2) each way (a round trip of
//               [delay, delay + jitter)), through a FaultProxy per
//               (worker, server) link; `script_flush` also runs SCRIPT
//               FLUSH on the targeted servers at each injection (what a
//               restart or failover does to the script cache)
//   kStall      every byte on the targeted links held for `fault_for`
//   kReset      the targeted links' connections reset (RST both sides)
//   kCutHolder  the holder's links to `target_servers` servers cut in a
//               private network namespace (IsolatedNetwork): both ways, then
//               requests only, then replies only, in turn
//   kCutMaster  Sentinel (`sentinel`): the master's port cut off from
//               everyone (workers, replicas, sentinels) both ways in the
//               namespace, long enough for the sentinels to fail over; then
//               healed (the old master rejoins as a replica). Audits read
//               the current master; no live samples.
//               Cluster (`cluster`): the client port of the master owning
//               the lock key's slot cut off from everyone (the cluster bus
//               stays up, so no failover: clients are partitioned from the
//               shard), then healed. Audits read the slot's owner.
//
// Targets: `target_servers` servers (rotating), and on them the links of
// the worker holding the lock at that moment (`holder_only`) or of every
// worker. A fault lasts `fault_for`, then the network heals; after each
// heal (`audits`) the driver holds every worker's next acquisition, waits
// until all are idle plus the release timeout, and reads the lock key on
// every server: a key then is a ghost. Meanwhile it samples the lock key on
// every server every 20 ms for the live ghost check, and at the end, after
// the workers have exited (each drains its releases first), audits once
// more. See network_check.h for the rules.
//
// Not thread-safe; kCutHolder runs the scenario on a thread of its own
// inside the namespace (RunIsolated) and returns kFailedPrecondition, with
// the one-line reason, where namespaces are unavailable.
#ifndef DLOCK_TESTS_TORTURE_NETWORK_DRIVER_H_
#define DLOCK_TESTS_TORTURE_NETWORK_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/network_check.h"
#include "dlock/tests/torture/torture_client.h"

namespace dlock {
namespace torture {

enum class NetFault { kNone, kDelay, kStall, kReset, kCutHolder, kCutMaster };
const char* NetFaultName(NetFault f);

struct NetScenarioSpec {
  std::string name;
  int lock_servers = 1;  // 1: RetryLock over SimpleLock; 3 or 5: RedLock
  NetFault fault = NetFault::kNone;
  int workers = 3;
  absl::Duration duration = absl::Seconds(6);
  absl::Duration ttl = absl::Seconds(2);
  // SimpleLock's command_timeout (its release's too); RedLock's
  // server_timeout.
  absl::Duration command_timeout = absl::Milliseconds(200);
  // RedLock's release_timeout (SimpleLock releases within command_timeout).
  absl::Duration release_timeout = absl::Seconds(1);
  absl::Duration hold = absl::Milliseconds(20);
  absl::Duration fault_every = absl::Milliseconds(800);  // healthy time between faults
  absl::Duration fault_for = absl::Milliseconds(800);
  absl::Duration delay = absl::Milliseconds(100);   // kDelay: round trip
  absl::Duration jitter = absl::Milliseconds(300);  // kDelay: round trip
  int target_servers = 1;
  bool holder_only = true;
  bool script_flush = false;
  bool audits = true;
  // The lock server is a Sentinel deployment (1 master, 2 replicas, 3
  // sentinels; test_support::SentinelDeployment) reached by a redis-sentinel://
  // URL; only kCutMaster (or kNone) then.
  bool sentinel = false;
  // The lock server is a Redis Cluster (3 masters + 3 replicas;
  // test_support::RedisCluster) reached by a redis-cluster:// URL; only
  // kCutMaster (or kNone) then.
  bool cluster = false;
};

struct NetScenarioResult {
  NetScenarioSpec spec;
  Report report;
  NetworkReport net;
  int64_t faults_injected = 0;
  int64_t acquire_errors = 0;
  int64_t audit_timeouts = 0;  // audits skipped: workers not idle in time
  int64_t master_changes = 0;  // Sentinel: faults after which another node was master
  double seconds = 0;
};

// Runs one scenario. kFailedPrecondition when it needs network namespaces
// and they are unavailable (the message says why, in one line); kUnavailable
// / kInternal when servers or workers cannot be started or a worker exits
// abnormally.
absl::StatusOr<NetScenarioResult> RunNetworkScenario(const NetScenarioSpec& spec,
                                                     const std::string& worker_path);

// Single server, RedLock 3 and RedLock 5 under delays around the command
// timeout and around the TTL, stalls, resets and holder cut-offs from a
// minority and a majority; durations scaled so the list takes about
// `total` (at least 4 s per scenario).
std::vector<NetScenarioSpec> NetworkScenarios(absl::Duration total);

// A markdown table, one row per scenario.
std::string FormatNetworkTable(const std::vector<NetScenarioResult>& results);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_NETWORK_DRIVER_H_
