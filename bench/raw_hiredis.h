// This header declares the raw hiredis baselines of lock_bench: the same
// lock workloads as dlock's, written directly on hiredis (sync API, and
// async API on libuv) with `SET key token NX PX ttl` to acquire and the
// standard Lua compare-and-delete to release. They are the ceilings every
// dlock figure is compared with, measured in the same run.
//
// With several ports, the async workloads are a raw parallel quorum: each
// phase (acquire, release) is sent to every server at once and completes
// when every server has answered; the acquire counts as taken on a
// majority.
//
// Each function runs to completion on the calling thread (contend/sync also
// starts worker threads and joins them) and returns the measured result, or
// kUnavailable when a server cannot be reached or answers with an error,
// kInvalidArgument for a combination that has no raw version.
#ifndef DLOCK_BENCH_RAW_HIREDIS_H_
#define DLOCK_BENCH_RAW_HIREDIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/bench/bench_util.h"

namespace dlock {
namespace bench {

struct RawOptions {
  std::string host = "127.0.0.1";
  std::vector<int> ports;
  std::string prefix;       // key prefix, unique per run
  int64_t n = 10000;        // seq / pipelined: measured cycles
  int64_t warmup = 500;     // seq / pipelined: unmeasured cycles first
  int depth = 1;            // pipelined: chains in flight
  int workers = 4;          // contend
  int64_t total = 2000;     // contend: critical sections in all
  int ttl_ms = 30000;       // lock TTL
  int retry_ms = 1;         // contend: sleep between attempts
  // seq / pipelined async only: use dlock's own acquire and release Lua
  // scripts (SET NX PX + INCR fence; compare-and-delete + PUBLISH) instead
  // of plain SET NX PX and a bare compare-and-delete. A diagnostic ceiling:
  // the same server work as dlock, without dlock's client code.
  bool dlock_scripts = false;
  // seq / pipelined async over several servers: move to the next phase
  // (release, then the next acquire) as soon as a majority has answered
  // (acquire: granted; release: replied), as a RedLock client does; the
  // other replies are drained in the background. The RedLock ceiling.
  // false: wait for every server.
  bool at_quorum = false;
};

// seq (depth 1) or pipelined (depth D) over hiredis async on libuv.
absl::StatusOr<BenchResult> RawAsyncCycles(const RawOptions& o,
                                           const std::string& workload);
// seq over hiredis sync (single server).
absl::StatusOr<BenchResult> RawSyncSeq(const RawOptions& o);
// contend: W threads with their own sync connections, 1 ms sleep polling.
absl::StatusOr<BenchResult> RawSyncContend(const RawOptions& o);
// contend: W tasks on one loop and one async connection, 1 ms timer polling.
absl::StatusOr<BenchResult> RawAsyncContend(const RawOptions& o);

// The release script used by the raw baselines.
extern const char kRawReleaseScript[];

}  // namespace bench
}  // namespace dlock

#endif  // DLOCK_BENCH_RAW_HIREDIS_H_
