// This header defines `PgFencedStore`: fenced writes to PostgreSQL through
// libpq. The caller's statement runs only if the caller's fence is not stale
// for its resource, in the same transaction that records the fence, so a
// lock holder that was paused past its TTL (GC, SIGSTOP, swap, VM
// migration) cannot overwrite what a newer holder wrote.
//
// How (one transaction per Write, READ COMMITTED):
//
//   BEGIN ISOLATION LEVEL READ COMMITTED;
//   INSERT INTO dlock_fences (resource, fence) VALUES ($1, 0)
//     ON CONFLICT (resource) DO NOTHING;              -- a new resource
//   SELECT fence, pg_current_xact_id()::text FROM dlock_fences
//     WHERE resource = $1 FOR UPDATE;                 -- H, row locked
//   -- fence < H: ROLLBACK, report stale (kFailedPrecondition, H attached)
//   UPDATE dlock_fences SET fence = $2 WHERE resource = $1;   -- if fence > H
//   <the caller's statement, with the caller's parameters>;
//   COMMIT;
//
// The fence row's lock serializes every fenced writer of one resource: a
// second writer's SELECT ... FOR UPDATE waits until the first commits or
// rolls back, and then -- READ COMMITTED re-reads the newest committed row
// version of a locked row -- sees the fence the first recorded. So a lower
// fence that commits after a higher one is impossible, whatever the timing,
// and each caller statement starts (READ COMMITTED takes a snapshot per
// statement) after every earlier fenced write of that resource committed,
// so a read-modify-write inside the statement sees their effects.
// Isolation: READ COMMITTED, set by Write itself. Under REPEATABLE READ or
// SERIALIZABLE the waiting writer would fail with a serialization error
// instead (reported as kAborted: retry) -- still safe, never stale-applied.
// Writes to the same tables that bypass the store (no fence) are not
// protected: route every writer of a protected resource through it.
//
// Read-modify-write: do the READ through Write too (any statement works,
// a SELECT included). It records the reader's fence, so from then on an
// older holder -- one that read before it and was paused -- is refused.
// With only the write fenced, that older holder's write would still be
// accepted while the newer holder has read but not yet written, and the
// newer holder's write would then overwrite it: a lost update (the fenced
// torture run, tests/torture/fenced_*, shows it).
//
// A fence equal to the highest seen is accepted (the same holder writing
// again); a higher one raises the highest. The fence table holds one row per
// resource ever written (delete rows of retired resources yourself).
//
// Outcomes of Write (see //fenced:fence_status):
//   applied      OK, the statement's rows / affected count;
//   stale        kFailedPrecondition, IsStaleFence(), HighestSeenFence();
//                nothing applied, the fence not recorded;
//   bad input    kInvalidArgument (empty resource, fence <= 0, SQL syntax or
//                bad parameter value) -- nothing sent for the first two;
//   missing      kNotFound: the fence table or a table of the statement does
//                not exist (call CreateFenceTable for the former);
//   constraint   kFailedPrecondition (not stale: IsStaleFence() false) when
//                the statement violates a constraint, e.g. CHECK (qty >= 0);
//   conflict     kAborted: serialization failure or deadlock; retry;
//   server gone  kUnavailable: connection refused or lost, server shut down
//                -- the transaction was rolled back, nothing applied (the
//                next call reconnects);
//   too slow     kDeadlineExceeded: `timeout` passed before COMMIT was sent;
//                the connection is dropped, so the server rolls back;
//   unknown      kUnknown: the connection was lost (or `timeout` passed)
//                after COMMIT was sent and the outcome could not be learned.
//                Before reporting that, Write reconnects once and asks the
//                server about its transaction (pg_xact_status): committed ->
//                applied (OK), aborted -> kUnavailable, nothing applied.
// In every case but `unknown` the write was applied entirely or not at all.
//
// Parameters go to the server as libpq parameters ($1, $2, ...), never
// pasted into SQL text. No exceptions.
//
// This class is thread-compatible: one connection; give each thread its own
// store. Blocking: each call waits for the server, at most `timeout`.
#ifndef DLOCK_FENCED_PG_STORE_H_
#define DLOCK_FENCED_PG_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"

struct pg_conn;

namespace dlock {
namespace fenced {

struct PgStoreOptions {
  // A libpq connection string ("host=... port=... dbname=...") or URI
  // ("postgresql://user@host:port/db"). connect_timeout defaults to 5 s.
  std::string conninfo;
  // The fence table, "name" or "schema.name" (letters, digits, '_').
  std::string fence_table = "dlock_fences";
  // Upper bound on each call (Write, Exec, ...): the client stops waiting
  // then and drops the connection. Also the server's statement_timeout
  // inside Write's transaction.
  absl::Duration timeout = absl::Seconds(10);
};

// A statement parameter; nullopt is SQL NULL. Text format: PostgreSQL casts
// it to the column's type ("42" for an int).
using PgParam = absl::optional<std::string>;

struct PgResult {
  // Rows the statement returned (SELECT, or RETURNING), values as text,
  // nullopt for NULL.
  std::vector<std::vector<absl::optional<std::string>>> rows;
  // Rows inserted/updated/deleted (PQcmdTuples), 0 when not applicable.
  int64_t affected = 0;
};

class PgFencedStore {
 public:
  // Connects. kInvalidArgument for a malformed fence table name or
  // conninfo; kUnavailable when the server refuses or cannot be reached.
  static absl::StatusOr<std::unique_ptr<PgFencedStore>> Connect(PgStoreOptions options);
  ~PgFencedStore();

  PgFencedStore(const PgFencedStore&) = delete;
  PgFencedStore& operator=(const PgFencedStore&) = delete;

  // CREATE TABLE IF NOT EXISTS <fence_table> (resource text PRIMARY KEY,
  // fence bigint NOT NULL CHECK (fence >= 0)).
  absl::Status CreateFenceTable();

  // Runs `sql` (any statement: UPDATE, INSERT, or the SELECT of a
  // read-modify-write) with `params` if `fence` is not stale for `resource`
  // (see the header comment for every outcome), recording `fence`.
  absl::StatusOr<PgResult> Write(absl::string_view resource, int64_t fence,
                                 const std::string& sql, const std::vector<PgParam>& params = {});

  // The highest fence recorded for `resource`; kNotFound when none was
  // (no fenced write to it committed), kInvalidArgument when empty.
  absl::StatusOr<int64_t> HighestFence(absl::string_view resource);

  // Runs `sql` with `params` WITHOUT a fence (autocommit): for reads, setup,
  // and to show what happens without fencing. Errors as for Write.
  absl::StatusOr<PgResult> Exec(const std::string& sql, const std::vector<PgParam>& params = {});

  // The fence table's quoted name, as used in SQL.
  const std::string& fence_table_sql() const { return table_; }

 private:
  explicit PgFencedStore(PgStoreOptions options, std::string table)
      : options_(std::move(options)), table_(std::move(table)) {}
  absl::Status EnsureConnected();
  void Drop();
  // One statement; `deadline` bounds the wait. `phase` names it in errors.
  absl::StatusOr<PgResult> Run(const std::string& sql, const std::vector<PgParam>& params,
                               absl::Time deadline, absl::string_view phase);
  void RollbackQuietly(absl::Time deadline);
  // After COMMIT's outcome was lost: asks a fresh connection whether `xid`
  // committed.
  absl::StatusOr<PgResult> ResolveCommit(const std::string& xid, absl::string_view resource,
                                         PgResult applied, const absl::Status& lost);

  PgStoreOptions options_;
  std::string table_;
  ::pg_conn* conn_ = nullptr;
};

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_PG_STORE_H_
