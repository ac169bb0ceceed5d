// This header defines the primitives' torture run: issue 16's shared
// primitives (read-write lock, semaphore, fair lock, multi-lock) in real
// worker processes (`primitive_worker`) on one real redis-server, while a
// nemesis pauses holders and waiters past their TTL (SIGSTOP), kills holders
// (kill -9, then starts a fresh process in their place) and kills and
// restarts the server (with AOF `appendfsync always`, or without persistence
// under the primitive's restart window). The checker (primitive_check.h)
// judges every overlap against the holders' lease validity, the fair lock's
// grant order against its queue, and failed multi-lock acquisitions for a
// strict subset left held.
//
// Not thread-safe; runs on the calling thread (the nemesis paces itself
// with sleeps: it is the test's clock, not a wait for a result).
#ifndef DLOCK_TESTS_TORTURE_PRIMITIVE_DRIVER_H_
#define DLOCK_TESTS_TORTURE_PRIMITIVE_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/primitive_check.h"

namespace dlock {
namespace torture {

enum class Nemesis {
  kPauseHolder,  // SIGSTOP a worker holding, for pause_for, then SIGCONT
  kPauseWaiter,  // the same for a worker waiting in Acquire
  kKillHolder,   // kill -9 a worker holding; a fresh process takes its slot
  kKillWaiter,   // the same for a worker waiting (FairLock: its queue entry
                 // stays behind until it expires)
  kRestartServer,  // kill -9 the lock server and restart it at once
};
const char* NemesisName(Nemesis n);

struct PrimitiveSpec {
  std::string name;
  // "rw" (workers [0, readers) read, the others write), "semaphore",
  // "fair", "multi" (worker i takes the set {m(i % pool), m((i+1) % pool),
  // ...} of set_size resources).
  std::string kind;
  int workers = 4;
  int readers = 2;
  int permits = 2;
  int pool = 3;
  int set_size = 2;
  std::vector<Nemesis> faults;  // injected in turn, one per fault_every
  bool persistence = false;     // AOF, fsync always
  absl::Duration restart_window = absl::ZeroDuration();
  absl::Duration duration = absl::Seconds(5);
  absl::Duration ttl = absl::Milliseconds(400);
  absl::Duration hold = absl::Milliseconds(200);   // > ttl / 3: renewed
  absl::Duration wait = absl::Seconds(1);
  absl::Duration queue_ttl = absl::Milliseconds(900);
  absl::Duration pause_for = absl::Milliseconds(1200);  // > ttl, > queue_ttl
  absl::Duration fault_every = absl::Milliseconds(500);
};

struct PrimitiveResult {
  PrimitiveSpec spec;
  PrimitiveReport report;
  int64_t holder_pauses = 0;   // pauses that caught a worker holding
  int64_t waiter_pauses = 0;   // ... waiting
  int64_t holder_kills = 0;
  int64_t waiter_kills = 0;
  int64_t restarts = 0;
  double seconds = 0;
};

// Runs one scenario. `worker_path` is the primitive_worker binary.
// kInvalidArgument for a bad spec; kUnavailable / kInternal when servers or
// workers cannot be started or a worker exits abnormally (its stderr tail
// in the message); kInvalidArgument naming the line for a malformed log.
absl::StatusOr<PrimitiveResult> RunPrimitiveScenario(const PrimitiveSpec& spec,
                                                     const std::string& worker_path);

// Two scenarios per primitive: every fault in turn on a persistent (AOF)
// server; kill -9 + restart of a server without persistence under a
// restart window of 1 s. Durations scaled so the list takes about `total`
// (at least 3 s per scenario).
std::vector<PrimitiveSpec> PrimitiveScenarios(absl::Duration total);

// A markdown table, one row per scenario.
std::string FormatPrimitiveTable(const std::vector<PrimitiveResult>& results);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_PRIMITIVE_DRIVER_H_
