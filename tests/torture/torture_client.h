// This header defines the pieces of dlock's torture run that do not depend
// on how the processes and servers are set up:
//
//   - The fenced register: two Lua scripts on a "store" Redis (not one of
//     the lock servers) that reject any fencing token lower than the
//     highest seen, on reads AND on writes. Fencing a read-modify-write
//     needs both: with only the write fenced, a stale holder (fence 10) that
//     read before being paused can still write before the new holder
//     (fence 11) writes, and one of the two increments is lost. With the
//     read fenced too, the new holder's read raises the bar and the stale
//     write is rejected.
//   - An unfenced twin register updated in the same critical section with a
//     plain GET then SET: it loses updates exactly when mutual exclusion
//     failed, so it shows what the lock alone guarantees.
//   - `TortureClient`: one worker's loop. Acquire (any `Lock` policy),
//     fenced read, unfenced read, hold for a while, check the lease's local
//     deadline, fenced write, unfenced write, record the interval, release,
//     repeat.
//   - `CheckRecords`: the checker over every worker's records plus the
//     store's final counters.
//
// Store keys (prefix P = "torture:"):
//   P reg        fenced register value        P reg:max   highest fence seen
//   P reg:acc    accepted fenced writes        P unf       unfenced register
//   P unf:n      unfenced increments attempted
#ifndef DLOCK_TESTS_TORTURE_TORTURE_CLIENT_H_
#define DLOCK_TESTS_TORTURE_TORTURE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace torture {

// KEYS: reg, reg:max. ARGV: fence. Reply {1, value} when fence >= max (and
// max becomes fence), {0, max} when the fence is stale.
const Script& FencedReadScript();
// KEYS: reg, reg:max, reg:acc. ARGV: fence, new value. Reply {1, max_before}
// when accepted (value set, max = fence, acc incremented), {0, max} stale.
const Script& FencedWriteScript();

struct StoreKeys {
  std::string reg = "torture:reg";
  std::string max = "torture:reg:max";
  std::string acc = "torture:reg:acc";
  std::string unf = "torture:unf";
  std::string unf_n = "torture:unf:n";
};

// The shared page between the torture driver and its workers (4096 bytes of
// int32 slots): slot `id` holds worker id's TortureClient::Phase, slot
// kWrittenSlotBase + id counts its accepted fenced writes.
constexpr int kWrittenSlotBase = 512;
// Ghost-key audits (network scenarios): the driver sets slot kGateSlot to
// hold every worker's next acquisition; worker id sets kIdleSlotBase + id
// while it waits there (TortureClient's gate / on_idle).
constexpr int kGateSlot = 600;
constexpr int kIdleSlotBase = 640;

// What happened to one critical section.
enum class CsOutcome {
  kWritten,         // fenced write accepted
  kReadRejected,    // fenced read rejected: a higher fence was already seen
  kWriteRejected,   // fenced write rejected (stale holder caught by fencing)
  kExpiredLocally,  // lease deadline passed before the write: not written
  kStoreError,      // the store did not answer (timeout / connection)
};
const char* CsOutcomeName(CsOutcome o);

struct CsRecord {
  int worker = 0;
  int64_t fence = 0;
  int64_t start_ns = 0;  // lease granted (shared monotonic clock)
  int64_t end_ns = 0;    // last write answered, before the release is sent
  CsOutcome outcome = CsOutcome::kStoreError;
  std::string token;     // the lease's token (what the lock key holds)
};

// The release of one critical section's lease: when it was sent and when
// its callback ran (shared monotonic clock), and the outcome's code.
struct ReleaseRecord {
  int worker = 0;
  std::string token;
  int64_t sent_ns = 0;
  int64_t done_ns = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
};

struct ClientOptions {
  int worker = 0;
  std::string resource = "torture";
  AcquireOptions acquire;                        // ttl, wait
  absl::Duration hold = absl::Milliseconds(2);   // between reads and writes
  absl::Duration store_timeout = absl::Seconds(2);
  absl::Duration retry_backoff = absl::Milliseconds(5);
  // Check the lease's local deadline before writing (a careful holder).
  // false models a pause that lands right after that check: the write goes
  // out with whatever lease the holder had, and only fencing can stop it.
  bool check_deadline = true;
  StoreKeys keys;
  // When set and true before an acquisition, the client does not acquire:
  // it reports itself idle (`on_idle(true)`: no lease held, no acquire or
  // release of its own in flight), checks again every `gate_poll`, and
  // reports `on_idle(false)` when it goes on. The network torture run uses
  // it to audit the servers for ghost keys while nobody holds the lock.
  std::function<bool()> gate;
  std::function<void(bool)> on_idle;
  absl::Duration gate_poll = absl::Milliseconds(5);
};

// One worker: loops acquire -> critical section -> release until Stop().
// Not thread-safe: call only on the loop's thread. `loop`, `lock` and
// `store` must outlive it.
class TortureClient {
 public:
  using Clock = std::function<int64_t()>;                 // shared clock, ns
  using Sink = std::function<void(const CsRecord&)>;      // every CS
  using ReleaseSink = std::function<void(const ReleaseRecord&)>;  // every release
  // Where a worker is in its critical section, published for the nemesis:
  // kBeforeWrite from the grant until just before the fenced write is sent
  // (a pause caught there is certain to write stale after a later holder),
  // kWriteSent from then until the CS ends.
  enum class Phase : int32_t { kOut = 0, kBeforeWrite = 1, kWriteSent = 2 };
  using InCs = std::function<void(Phase)>;                // phase changes

  TortureClient(EventLoop* loop, Lock* lock, Transport* store,
                ClientOptions options, Clock clock, Sink sink,
                InCs in_cs = nullptr);
  ~TortureClient();

  // Called when each release's callback runs (optional).
  void set_release_sink(ReleaseSink sink);

  void Start();
  // Finishes the current step, releases a held lease, then calls `done`
  // (on the loop). No new acquisition starts after Stop.
  void Stop(std::function<void()> done);

  int64_t acquired() const;
  int64_t acquire_errors() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

struct Counters {
  int64_t reg = 0, acc = 0, unf = 0, unf_n = 0;
};

// The command that reads the store's counters (MGET of StoreKeys' reg, acc,
// unf, unf_n), and its reply read back; kInternal for a reply of another
// shape.
std::vector<std::string> ReadCountersCommand();
absl::StatusOr<Counters> ParseCounters(const Reply& mget);

// An integer reply, or a string one holding a number; 0 otherwise.
int64_t ReplyToInt(const Reply& r);

struct Report {
  int64_t cs_completed = 0;      // fenced writes accepted (worker records)
  int64_t cs_attempted = 0;      // leases granted
  int64_t overlaps = 0;          // pairs of holders whose intervals overlap
  int64_t stale_rejected = 0;    // fenced reads + writes rejected
  int64_t expired_locally = 0;   // skipped: local deadline passed
  int64_t store_errors = 0;
  int64_t lost_fenced = 0;       // accepted fenced writes - register value
  int64_t lost_unfenced = 0;     // unfenced increments - unfenced value
  int64_t acc_vs_records = 0;    // server-counted accepted - worker records
};

// Checks the records of every worker against the store's counters.
Report CheckRecords(std::vector<CsRecord> records, const Counters& counters);

// Number of pairs of intervals from different workers that intersect
// (half-open [start, end)).
int64_t CountOverlaps(std::vector<CsRecord> records);

// Read-write lock: pairs of intersecting intervals where one is a reader's
// and the other a writer's (`is_reader(worker)`), and pairs of two writers.
struct ReadWriteOverlaps {
  int64_t reader_writer = 0;
  int64_t writer_writer = 0;
};
ReadWriteOverlaps CountReadWriteOverlaps(std::vector<CsRecord> records,
                                         const std::function<bool(int)>& is_reader);

// Semaphore: the largest number of intervals that intersect at one instant.
int64_t MaxConcurrent(const std::vector<CsRecord>& records);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_TORTURE_CLIENT_H_
