// This header defines the fenced torture run (issue 24): worker processes
// (fenced_worker) increment one counter in a protected store -- PostgreSQL
// (PgFencedStore) or a second redis-server, not the lock's
// (RedisFencedStoreClient) -- by read-modify-write
// under a dlock lock with a short TTL, while a nemesis SIGSTOPs workers
// between their read and their write for longer than the TTL (so another
// worker takes the lock over) and kill -9s workers (respawned). Each applied
// write also inserts one `increments` row in the same statement, so
//   lost updates = rows in increments - the counter's value
// counts exactly the increments that were overwritten (on Redis: the
// increments counter, raised in the same fenced write / MULTI as the
// counter). With fencing (the lease's fence) it must be 0, and the stale
// writes the store refused are counted; without fencing the same run loses
// updates.
//
// It starts its own lock redis-server and protected store (PostgreSQL or a
// second redis-server) and stops them.
#ifndef DLOCK_TESTS_TORTURE_FENCED_TORTURE_H_
#define DLOCK_TESTS_TORTURE_FENCED_TORTURE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock {
namespace torture {

// Shared page layout (int32 slots): [0, kFencedMaxWorkers) phase (1 =
// between read and write); then per-worker counters.
constexpr int kFencedMaxWorkers = 32;
constexpr int kFencedAppliedSlot = 100;
constexpr int kFencedStaleSlot = 200;
constexpr int kFencedErrorSlot = 300;
constexpr char kFencedResource[] = "torture-counter";
// The Redis store's data keys: RedisFencedStore::DataKey(kFencedResource,
// "counter:" / "increments:") (the worker checks they match), so both sit in
// the fence record's slot.
constexpr char kFencedRedisCounterKey[] = "counter:{torture-counter}";
constexpr char kFencedRedisIncrementsKey[] = "increments:{torture-counter}";

// The protected store the workers read-modify-write.
enum class FencedStoreKind { kPostgres, kRedis };

// "postgres" / "redis" (the worker's --store flag and the table's column).
const char* FencedStoreName(FencedStoreKind kind);

struct FencedTortureOptions {
  std::string worker_path;  // the fenced_worker binary
  FencedStoreKind store = FencedStoreKind::kPostgres;
  int workers = 4;
  absl::Duration duration = absl::Seconds(10);
  absl::Duration ttl = absl::Milliseconds(300);
  // Each pause lasts ttl * pause_factor.
  double pause_factor = 2.5;
  // A kill -9 (and respawn) of a random worker every this often.
  absl::Duration kill_every = absl::Seconds(2);
  bool fencing = true;
  // With fencing: the read of each read-modify-write goes through the store
  // too. false shows why it must (a few updates are lost).
  bool fence_reads = true;
};

struct FencedTortureResult {
  int64_t increments = 0;    // applied writes (rows in `increments`, or the
                             // Redis increments counter)
  int64_t counter = 0;       // the counter's final value
  int64_t lost_updates = 0;  // increments - counter
  int64_t stale_refused = 0; // writes the store refused as stale
  int64_t write_errors = 0;  // other failures (killed mid-write, ...)
  int pauses = 0;
  int kills = 0;
};

absl::StatusOr<FencedTortureResult> RunFencedTorture(const FencedTortureOptions& options);

// One Markdown table row: | store | fencing | workers | s | TTL | pauses | kills |
// increments | counter | lost | stale refused |.
std::string FencedTortureRow(const FencedTortureOptions& options,
                             const FencedTortureResult& result);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_FENCED_TORTURE_H_
