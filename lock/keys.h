// This header defines `KeyScheme`: the keys of a resource R with prefix P.
// Every key of a resource carries one hash tag, so all of them sit in one
// Redis Cluster slot whatever bytes R holds:
//   P{R}           the lock: a string holding the owner's token, with PX TTL
//   P{R}:fence     the fencing counter of dlock <= 0.x (no TTL): no longer
//                  read or written (a missing fence mark starts above it:
//                  docs/fences.md, "Upgrading")
//   P{R}:released  the pub/sub channel a release publishes on
// That layout (the one of every earlier release) is kept whenever its hash
// tag is non-empty, i.e. unless R is empty or starts with '}' (Redis hashes
// the whole key when "{}" is its first tag, so "dlock:{}x}" and
// "dlock:{}x}:fence" landed in different slots). Such names get
//   P#{T}:lock:R   P#{T}:fence:R   P#{T}:released:R
// where T = SlotTag(CRC16(R) mod 16384), a short tag that spreads them over
// the slots. No key of that form is a key of the first form ("P#" vs "P{"),
// and the kind comes before R, so the layout stays one-to-one.
// A prefix containing braces takes the hash tag out of R's hands: its first
// "{...}" decides the slot of every key (all resources in one slot), and a
// prefix whose first brace pair is empty ("{}") or whose first '{' is never
// closed ("app{") cannot be clustered: the per-slot marker below would not
// share the resource's slot, and the cluster transport refuses such
// cross-slot scripts with kInvalidArgument.
//
// The read-write lock adds P{R}:readers and P{R}:writer-waiting
// (read_write_scripts.h); its writer holds P{R} as the plain lock does.
// ReentrantLock uses the lock key as a hash {owner -> count} instead of a
// string; a key of the other kind is foreign data to the acquire of both
// (kInternal, never overwritten).
//
// One more key, read by both acquire scripts, the data-set marker:
//   standalone (per_slot_data_set false):  P"data-set-began", one per server
//   Redis Cluster (per_slot_data_set true): P"data-set-began:{T}", one per
//       slot, T = SlotTag(slot of R's keys), so the script reads it in the
//       resource's slot. `dlock trust` on a cluster sets all 16384.
// Its value: when the data set began (Unix ms; "0" when declared trusted) --
// see scripts.h and RedLock's RESTART SAFETY. LockCommands turns
// per_slot_data_set on when its transport is a cluster (Transport::cluster()),
// so standalone deployments keep their one marker unchanged.
//
// Fences: one high-water mark per server (per slot on a Cluster), beside
// the marker, so what dlock leaves on a server does not grow with the
// number of resources ever locked:
//   standalone: P"fence-hwm"          Redis Cluster: P"fence-hwm:{T}"
// Its value: the last fence this server (slot) issued, for any resource.
// Every acquire issues hwm + 1 (scripts.h: the rule and what it assumes of
// TIME). No TTL; it must not be evicted (noeviction and volatile-* policies
// never evict a key without a TTL).
#ifndef DLOCK_LOCK_KEYS_H_
#define DLOCK_LOCK_KEYS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"

namespace dlock {

struct KeyScheme {
  std::string prefix = "dlock:";
  // One data-set marker per Redis Cluster slot instead of one per server.
  bool per_slot_data_set = false;

  std::string LockKey(absl::string_view resource) const;      // P{R}
  std::string FenceKey(absl::string_view resource) const;     // P{R}:fence
  std::string ChannelKey(absl::string_view resource) const;   // P{R}:released
  // The data-set marker the acquire of `resource` reads: when this server's
  // (slot's) data set began, as Unix ms, set by the first acquire script
  // that meets it absent (the server's TIME), "0" once declared trusted
  // (TrustDataSetCommand). Never a lock key.
  std::string DataSetKey(absl::string_view resource) const;
  // The per-server marker P"data-set-began" (standalone).
  std::string DataSetKey() const;
  // The per-slot marker P"data-set-began:{SlotTag(slot)}", slot in
  // [0, 16384).
  std::string SlotDataSetKey(int slot) const;
  // The fence high-water mark the acquire of `resource` reads and raises:
  // P"fence-hwm" (standalone) or P"fence-hwm:{SlotTag(slot of R's keys)}"
  // (per_slot_data_set: the resource's slot).
  std::string FenceHwmKey(absl::string_view resource) const;
  std::string FenceHwmKey() const;  // P"fence-hwm" (standalone)
  std::string SlotFenceHwmKey(int slot) const;
};

// The command that declares a server's data set trusted: SET
// P"data-set-began" 0. Then the restart window never refuses it and a
// missing fence mark starts at 0 (fences from 1). Only for a server whose data
// set is known to be complete: a never-used server, or one whose data
// survived (persistence). UNSAFE right after a restart that lost data:
// leases granted before it may still be live elsewhere, and fences would
// start again at 1. Used by test fixtures, examples and benchmarks so they
// need not wait the window. An admin does the same with
// `redis-cli SET dlock:data-set-began 0`.
std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys);

// The same for a Redis Cluster: SET P"data-set-began:{T}" 0 for every slot
// (16384 commands, each routed to the slot's master). Same caveats, per
// master: only for masters whose data set is complete.
std::vector<std::vector<std::string>> TrustClusterDataSetCommands(
    const KeyScheme& keys);

// The three keys of one resource (KeyScheme's LockKey, FenceKey and
// ChannelKey, in either layout), built once into one buffer that lives
// inline for a prefix and resource of up to about 50 bytes together: an
// operation builds it on the stack and sends views of it, without a heap
// allocation per key.
class ResourceKeys {
 public:
  ResourceKeys(absl::string_view prefix, absl::string_view resource);
  ResourceKeys(const ResourceKeys&) = delete;
  ResourceKeys& operator=(const ResourceKeys&) = delete;

  absl::string_view lock() const { return {buf_.data(), lock_len_}; }
  absl::string_view fence() const { return {buf_.data() + fence_off_, fence_len_}; }
  absl::string_view channel() const { return {buf_.data() + channel_off_, channel_len_}; }

 private:
  // The three keys back to back: lock, fence, channel (in the classic
  // layout the lock key is also the fence key's beginning, so it is not
  // written twice).
  absl::InlinedVector<char, 128> buf_;
  size_t lock_len_ = 0;
  size_t fence_off_ = 0, fence_len_ = 0;
  size_t channel_off_ = 0, channel_len_ = 0;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_KEYS_H_
