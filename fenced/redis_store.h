// This header defines `RedisFencedStore`: writes to Redis that apply only
// for the current holder of a lock. The store keeps, per resource, the
// highest fence (Lease::fence) written; a write carrying a lower fence is
// refused, so a holder that was paused past its lease (GC, SIGSTOP, swap)
// cannot overwrite what the next holder wrote.
//
//   RedisFencedStore store(&transport);            // any Transport
//   RedisWrite write;
//   write.IncrBy(store.DataKey("sku-42", "stock:"), -1, /*floor=*/0)
//        .Set(store.DataKey("sku-42", "last-order:"), "order-7");
//   absl::Status sent = store.Write("sku-42", lease.fence, std::move(write),
//       [](absl::StatusOr<RedisWriteResult> r) {
//         if (IsStaleFence(r.status())) { /* a newer holder wrote: stop */ }
//       });
//
// One script does it atomically on the server (redis_store_script.h): read
// the resource's fence record; if the caller's fence is below it, refuse
// (stale); check every operation (key types, integer values, floors); only
// then record the fence (raised to the caller's, never lowered) and apply
// every operation. A write is all or nothing: any refusal writes nothing,
// not even the fence.
//
// The store may be the Redis that holds the locks or any other one: it
// depends only on the Transport and Script interfaces (the fake runs the
// same script), never on a lock policy. Fences are per resource: a high
// fence written for resource B never makes resource A's writes pass or
// fail.
//
// KEY LAYOUT (Cluster-safe). The fence record of resource R is
//   P{R}               (P = options.prefix, default "dlock:fenced:")
// or, for an empty R or one starting with '}' (whose hash tag would be
// empty), P#{T}:R with T = SlotTag(slot of R), as the lock keys do
// (lock/keys.h). The caller names the data keys. A script's keys must sit
// in one slot on a Redis Cluster, so by default every data key must hash to
// the fence record's slot, on every transport (code written against one
// server keeps working on a cluster): put "{R}" in the key, or build it
// with DataKey(R, name) = name + "{R}". A key in another slot is refused
// with kInvalidArgument before anything is sent.
// `allow_cross_slot` lifts that check on a single server (never on a
// cluster transport). The fence records themselves never expire: one small
// string per resource ever written through the store (delete P{R} by hand
// only for a resource that will never be locked again).
//
// OUTCOMES of Write (the callback's status):
//   OK                   applied; RedisWriteResult has one value per op.
//   kFailedPrecondition  stale: fence < the highest recorded for the
//                        resource (IsStaleFence, HighestSeenFence; see
//                        fence_status.h). Nothing applied.
//   kOutOfRange          an IncrBy would go below its floor
//                        (IsBelowFloor), or leave +-(2^53 - 1). Nothing
//                        applied, distinct from stale: the holder is
//                        current, the data said no (e.g. out of stock).
//   kInternal            foreign data: a data key of another type
//                        (WRONGTYPE), IncrBy on a non-integer, a fence
//                        record that is not a fence, an unexpected reply.
//                        Nothing applied.
//   kUnavailable         the store is unreachable or answered an error.
//                        A connection lost after sending leaves the
//                        outcome unknown, as kDeadlineExceeded does.
//   kDeadlineExceeded    no reply within options.timeout: the write may or
//                        may not have applied (it is never sent twice;
//                        read the data, or write again with the same fence:
//                        an equal fence is current).
//   kPermissionDenied    the server refused the script (ACL NOPERM/NOAUTH).
//   kCancelled           the transport was closed.
// Write itself returns kInvalidArgument (and the callback never runs) for:
// an empty resource, a fence <= 0 or > 2^53 - 1 (CheckFenceArgs), an
// empty key, a key used twice in one write, a data key equal to the fence
// record, a data key outside the record's slot (see KEY LAYOUT), a
// HashSet without fields, a negative Set TTL, an IncrBy delta or floor
// beyond +-(2^53 - 1); and the transport's own rejection (kCancelled after
// Close). A write with no operations checks and records the fence.
//
// Async contract (as the locks): an accepted call runs its callback exactly
// once, on the transport's loop, never inside the call. A write cannot be
// cancelled once sent (it may already have applied); Close the transport to
// fail it with kCancelled.
//
// Not thread-safe: call only on the thread running the transport's loop
// (from other threads: BlockingRedisFencedStore, blocking_redis_store.h).
// The transport is borrowed and must outlive the store and its calls.
#ifndef DLOCK_FENCED_REDIS_STORE_H_
#define DLOCK_FENCED_REDIS_STORE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace fenced {

// Largest fence, delta, floor or value the store handles: 2^53 - 1, the
// last integer a Lua number (a double) holds exactly. dlock's fences stay
// below it.
inline constexpr int64_t kMaxFencedInteger = 9007199254740991;

// The operations of one fenced write, applied in order, all or nothing.
// Each key at most once per write. A plain value: copyable, movable.
class RedisWrite {
 public:
  struct Op {
    enum class Kind { kSet, kHashSet, kIncrBy, kDelete };
    Kind kind = Kind::kSet;
    std::string key;
    std::string value;                                        // kSet
    absl::Duration ttl = absl::ZeroDuration();                // kSet: 0 = none
    std::vector<std::pair<std::string, std::string>> fields;  // kHashSet
    int64_t delta = 0;                                        // kIncrBy
    absl::optional<int64_t> floor;                            // kIncrBy
  };

  // SET key value (PX ttl when ttl > 0; the TTL is rounded up to whole ms).
  // The key must hold a string or nothing. Result: 1.
  RedisWrite& Set(std::string key, std::string value,
                  absl::Duration ttl = absl::ZeroDuration());
  // HSET key f1 v1 ...: the key must hold a hash or nothing. Result: the
  // number of fields that were new.
  RedisWrite& HashSet(std::string key,
                      std::vector<std::pair<std::string, std::string>> fields);
  // INCRBY key delta (negative: a decrement), refused (kOutOfRange,
  // IsBelowFloor) when the new value would be below `floor`. A missing key
  // counts as 0. Result: the new value.
  RedisWrite& IncrBy(std::string key, int64_t delta,
                     absl::optional<int64_t> floor = absl::nullopt);
  // DEL key (any type). Result: 1 if it existed, else 0.
  RedisWrite& Delete(std::string key);

  const std::vector<Op>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }

 private:
  std::vector<Op> ops_;
};

struct RedisWriteResult {
  // The caller's fence, now current for the resource on this store.
  int64_t fence = 0;
  // One per operation, in order (see RedisWrite).
  std::vector<int64_t> values;
};

struct RedisFencedStoreOptions {
  // Prefix of the fence records. Must not contain '{' or '}' (the record's
  // hash tag is the resource's).
  std::string prefix = "dlock:fenced:";
  // Bound on each write's round trip (twice this when the script must be
  // sent again after NOSCRIPT). Must be positive.
  absl::Duration timeout = absl::Seconds(2);
  // Single server only: accept data keys in any slot (see KEY LAYOUT).
  // Ignored on a cluster transport, which always requires one slot.
  bool allow_cross_slot = false;
};

// True for the kOutOfRange a write gets when an IncrBy would go below its
// floor (not for the +-(2^53 - 1) range).
bool IsBelowFloor(const absl::Status& status);

class RedisFencedStore {
 public:
  using WriteCallback = absl::AnyInvocable<void(absl::StatusOr<RedisWriteResult>) &&>;
  using FenceCallback = absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&>;

  // kInvalidArgument for a null transport, a prefix with braces or a
  // non-positive timeout.
  static absl::Status ValidateOptions(const Transport* transport,
                                      const RedisFencedStoreOptions& options);

  // `options` must pass ValidateOptions (else every call returns its error).
  explicit RedisFencedStore(Transport* transport, RedisFencedStoreOptions options = {});

  RedisFencedStore(const RedisFencedStore&) = delete;
  RedisFencedStore& operator=(const RedisFencedStore&) = delete;

  // Applies `write` if `fence` is current for `resource` (see the outcome
  // table above).
  absl::Status Write(absl::string_view resource, int64_t fence, RedisWrite write,
                     WriteCallback callback);

  // The highest fence recorded for `resource` (0 when none was). kInternal
  // when the record holds something else; transport failures as Write.
  // kInvalidArgument (callback never runs) for an empty resource.
  absl::Status HighestFence(absl::string_view resource, FenceCallback callback);

  // The fence record's key (KEY LAYOUT above).
  std::string FenceKey(absl::string_view resource) const;
  // A data key in the fence record's slot: name + "{" + resource + "}"
  // (name + "#{T}:" + resource for names whose hash tag would be empty).
  // `name` must contain no '{'.
  std::string DataKey(absl::string_view resource, absl::string_view name) const;

  const RedisFencedStoreOptions& options() const { return options_; }

 private:
  absl::Status CheckWrite(absl::string_view resource, int64_t fence,
                          const RedisWrite& write, const std::string& fence_key) const;

  Transport* transport_;
  RedisFencedStoreOptions options_;
  absl::Status options_status_;
};

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_REDIS_STORE_H_
