// This header defines the PostgreSQL mode that examples/order_processing and
// examples/stock_deduction share (--postgres): a lock holder that is paused
// past its lease's TTL, on a real database.
//
// The run: the example starts its own PostgreSQL (//testing:pg_process) and
// uses the example's Redis for the lock.
//   1. Holder A takes the lock (SimpleLock, TTL 1 s; fence fA) and reads the
//      row it will change ("order pending?", "stock left?").
//   2. A is paused -- a stop-the-world GC, SIGSTOP, swap, a VM migration:
//      its code does not run. B asks for the lock at once and is refused
//      (A's lease is live).
//   3. A's lease expires while A is still paused. B takes the lock (fence
//      fB > fA), reads, writes, commits, releases.
//   4. A resumes, unaware its lease is gone, and writes what it decided in
//      step 1.
//   With fencing (default) every write goes through PgFencedStore with the
//   writer's fence: A's write is refused as stale (fA < fB) and the rows are
//   exactly right. With --nofencing the writes are plain statements: A's
//   write lands on top of B's -- the lost update -- and the example's check
//   sees the damage.
//
// A's pause is simulated on the example's single thread: A's next step is
// simply not run until B has finished, which is exactly what a paused
// process looks like to everyone else (the torture test in tests/torture
// pauses real processes with SIGSTOP).
//
// Not thread-safe: use it on the thread that runs the example's loop.
#ifndef DLOCK_EXAMPLES_SUPPORT_PAUSED_HOLDER_H_
#define DLOCK_EXAMPLES_SUPPORT_PAUSED_HOLDER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/fenced/pg_store.h"

namespace dlock {
namespace examples {

// A statement a holder decided to run; empty `sql` means "nothing to do".
struct PlannedWrite {
  std::string sql;
  std::vector<fenced::PgParam> params;
  std::string description;  // "charge order 1001", for the output
};

struct PausedHolderScenario {
  // The lock's resource, also the fence's resource in the store.
  std::string resource;
  // Statements that create and fill the scenario's tables (one each).
  std::vector<std::string> setup;
  // The query whose first value a holder bases its decision on. With
  // fencing it runs through the store with the holder's fence too (a
  // read-modify-write's read must: see pg_store.h).
  std::string read_sql;
  std::vector<fenced::PgParam> read_params;
  // What holder `who` ("A"/"B") writes after reading `seen`.
  std::function<PlannedWrite(const std::string& seen, const std::string& who)> plan;
  // Checks the final rows; prints what it found; true when exactly right.
  std::function<bool(fenced::PgFencedStore&)> check;
};

// Runs the scenario (see the header comment) on server 0 of `env` (a real
// Redis: the fake's virtual time cannot pause a holder against a real
// database). Returns the example's exit code: 0 when the final rows are
// exactly right (and, with fencing, A's stale write was refused), 1 when
// they are not (the lost update; what --nofencing must show), 2 when the
// run could not be made (PostgreSQL or Redis unavailable).
int RunPausedHolder(const PausedHolderScenario& scenario, ExampleEnv& env, bool fencing);

}  // namespace examples
}  // namespace dlock

#endif  // DLOCK_EXAMPLES_SUPPORT_PAUSED_HOLDER_H_
