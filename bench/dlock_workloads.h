// This header declares lock_bench's dlock workloads: the same seq /
// pipelined / contend cycles as the raw baselines (raw_hiredis.h), run
// through dlock's public API on the real transport (UvEventLoop +
// HiredisTransport), plus the watchdog workload.
//
//   workload   | one port                         | several ports
//   -----------+----------------------------------+---------------------
//   seq        | SimpleLock (async) or the        | RedLock
//              | blocking facade (api blocking)   |
//   pipelined  | D SimpleLock chains on one loop  | D RedLock chains
//   contend    | RetryLock (or FairLock, policy   | -
//              | fair): W tasks on one loop       |
//              | (async) or W threads (blocking)  |
//   watchdog   | L SimpleLock leases renewed by   | -
//              | one Watchdog                     |
//
// RunDlock runs to completion on the calling thread and returns the
// measured result, or kUnavailable / kInvalidArgument like the raw ones.
#ifndef DLOCK_BENCH_DLOCK_WORKLOADS_H_
#define DLOCK_BENCH_DLOCK_WORKLOADS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/bench/bench_util.h"
#include "dlock/bench/raw_hiredis.h"

namespace dlock {
namespace bench {

struct DlockOptions {
  RawOptions raw;             // host, ports, prefix, n, depth, workers, ...
  std::string api = "async";  // async | blocking
  int64_t leases = 10000;     // watchdog
  double seconds = 10;        // watchdog
  // contend, async: when > 0, this many workers each with its own
  // connection and RetryLock (separate clients); 0: `raw.workers` tasks
  // sharing one RetryLock.
  int clients = 0;
  // contend, async: "retry" (RetryLock over SimpleLock) or "fair" (FairLock,
  // waiting in its server-side queue).
  std::string policy = "retry";
  // contend, policy retry: RetryLockOptions::wake_stagger.
  absl::Duration wake_stagger = absl::ZeroDuration();
  // RedLock's delayed-restart rule (RedLockOptions::delayed_restart). On by
  // default, as in the library; off as a diagnostic (it adds an INFO to
  // every acquire).
  bool redlock_delayed_restart = true;
  // RedLockOptions::check_run_id_every_command (INFO with every acquire).
  bool redlock_info_every_command = false;
  // Async seq/pipelined: SimpleLockOptions / RedLockOptions::fencing. Off:
  // SET NX PX alone, no fence (the work node-redlock does).
  bool fencing = true;
  // One port, async seq/pipelined: SimpleLockOptions::replica_ack.min_replicas
  // (WAIT behind every grant; the port must be a master with replicas).
  int min_replicas = 0;
};

absl::StatusOr<BenchResult> RunDlock(const DlockOptions& o,
                                     const std::string& workload);

}  // namespace bench
}  // namespace dlock

#endif  // DLOCK_BENCH_DLOCK_WORKLOADS_H_
