// This header defines the torture run's driver: it starts the Redis servers
// (lock servers plus one "store" server holding the fenced register, which
// the nemesis never touches), forks and execs the worker processes
// (`torture_worker`), runs a nemesis for the scenario's duration, stops the
// workers, and checks their records against the store (torture_client.h).
//
// Scenarios (`Fault`):
//   kNone            no fault: the baseline
//   kPauseHolder     SIGSTOP a worker while it is inside its critical
//                    section, for longer than the TTL, then SIGCONT
//   kKillRestart     kill -9 a lock server and restart it at once (with or
//                    without persistence: `persistence`)
//   kKillMinority    RedLock: kill -9 one server (rotating), restart at once
//                    without persistence
//   kPauseMinority   RedLock: SIGSTOP one server (rotating) for longer than
//                    the TTL, then SIGCONT
//   kFailover        Sentinel (`sentinel`): SENTINEL FAILOVER, then wait for
//                    the new master
//   kKillMaster      Sentinel: kill -9 the master, wait for the sentinels to
//                    promote a replica, restart the killed node (empty; the
//                    sentinels turn it into a replica)
//
// Intervals are stamped by the workers on CLOCK_MONOTONIC, which is shared
// by every process on one machine, so the checker can compare them.
//
// Not thread-safe; runs on the calling thread (the nemesis paces itself
// with sleeps: it is the test's clock, not a wait for a result).
#ifndef DLOCK_TESTS_TORTURE_TORTURE_DRIVER_H_
#define DLOCK_TESTS_TORTURE_TORTURE_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/torture_client.h"

namespace dlock {
namespace torture {

enum class Fault {
  kNone,
  kPauseHolder,
  kKillRestart,
  kKillMinority,
  kPauseMinority,
  kFailover,
  kKillMaster,
};
const char* FaultName(Fault f);

struct ScenarioSpec {
  std::string name;
  int lock_servers = 1;  // 1: RetryLock over SimpleLock; 3 or 5: RedLock
  bool persistence = false;  // lock servers run with appendonly + fsync always
  Fault fault = Fault::kNone;
  int workers = 3;
  absl::Duration duration = absl::Seconds(5);
  absl::Duration ttl = absl::Milliseconds(500);
  absl::Duration fault_every = absl::Seconds(1);   // between injections
  absl::Duration pause_for = absl::Milliseconds(1500);
  absl::Duration hold = absl::Milliseconds(20);    // inside the CS
  // Workers check their lease deadline before writing. The SIGSTOP-holder
  // scenarios turn it off: that models the pause landing right after the
  // check, the case only fencing can catch.
  bool check_deadline = true;
  // RedLock: delayed-restart window (RedLockOptions::max_ttl).
  absl::Duration redlock_max_ttl = absl::Seconds(2);
  bool redlock_delayed_restart = true;
  // One server: SimpleLock's restart window (zero: off, as by default).
  absl::Duration single_restart_window = absl::ZeroDuration();
  // Sentinel: the lock server is a master with 2 replicas and 3 sentinels
  // (test_support::SentinelDeployment), reached through a redis-sentinel:// URL;
  // `min_replicas` is SimpleLock's replica acknowledgement.
  bool sentinel = false;
  int min_replicas = 0;
  // The primitive (one lock server only): "" the plain lock; "rw" a
  // ReadWriteLock, workers [0, readers) take reader(), the rest writer()
  // (at least one writer);
  // "semaphore" a Semaphore of `permits` permits. Readers and permit
  // holders share, so their fenced-register counts promise nothing: these
  // scenarios are judged by `rw` / `max_concurrent` in the result.
  std::string primitive;
  int readers = 0;
  int permits = 2;
};

struct ScenarioResult {
  ScenarioSpec spec;
  Report report;
  int64_t faults_injected = 0;
  // SIGSTOP-holder scenarios: pauses that caught a holder before its fenced
  // write was sent and lasted until another worker's fenced write was
  // accepted. Each one must end in a stale read or write rejected by
  // fencing, so report.stale_rejected >= stale_expected.
  int64_t stale_expected = 0;
  int64_t acquire_errors = 0;  // summed over workers (failed waits)
  // "rw": overlapping reader/writer and writer/writer intervals.
  ReadWriteOverlaps rw;
  // The most critical sections open at one instant (the semaphore's cap).
  int64_t max_concurrent = 0;
  double seconds = 0;
};

// Runs one scenario. `worker_path` is the torture_worker binary. Returns
// kUnavailable / kInternal when servers or workers cannot be started or a
// worker exits abnormally (its stderr tail in the message).
absl::StatusOr<ScenarioResult> RunScenario(const ScenarioSpec& spec,
                                           const std::string& worker_path);

// The standard scenario list; every duration scaled so the whole list takes
// about `total` (at least 3 s per scenario).
std::vector<ScenarioSpec> StandardScenarios(absl::Duration total);

// Sentinel failovers during holds, with and without replica
// acknowledgement (torture_main --sentinel); durations as above.
std::vector<ScenarioSpec> SentinelScenarios(absl::Duration total);

// A markdown table of results, one row per scenario.
std::string FormatTable(const std::vector<ScenarioResult>& results);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_TORTURE_DRIVER_H_
