// This header defines `KeyScheme`: the keys of a resource R with prefix P
// (all share the hash tag {R}, so they sit in one Redis Cluster slot):
//   P{R}           the lock: a string holding the owner's token, with PX TTL
//   P{R}:fence     the fencing counter (no TTL; INCR by every acquire)
//   P{R}:released  the pub/sub channel a release publishes on
// The read-write lock adds P{R}:readers and P{R}:writer-waiting
// (read_write_scripts.h); its writer holds P{R} as the plain lock does.
// ReentrantLock uses P{R} as a hash {owner -> count} instead of a string; a
// key of the other kind is foreign data to the acquire of both (kInternal,
// never overwritten).
// One more key per prefix and server, read by both acquire scripts:
//   P"data-set-began"  when the server's data set began (Unix ms; "0" when
//                      declared trusted) -- see scripts.h and RedLock's
//                      RESTART SAFETY.
// It has no hash tag, so it is not in the resource's Redis Cluster slot: the
// acquire scripts need a standalone server (or a Cluster routing the marker
// with the resource, not supported yet).
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

  std::string LockKey(absl::string_view resource) const;      // P{R}
  std::string FenceKey(absl::string_view resource) const;     // P{R}:fence
  std::string ChannelKey(absl::string_view resource) const;   // P{R}:released
  // The data-set marker: when this server's data set began, as Unix ms,
  // set by the first acquire script that meets the server without it (the
  // server's TIME), "0" once declared trusted (TrustDataSetCommand). One per
  // prefix and server, never a lock key (it has no '{').
  std::string DataSetKey() const;                              // P + "data-set-began"
};

// The command that declares a server's data set trusted: SET
// P"data-set-began" 0. Then the restart window never refuses it and fences
// of resources without a fence key start at 1. Only for a server whose data
// set is known to be complete: a never-used server, or one whose data
// survived (persistence). UNSAFE right after a restart that lost data:
// leases granted before it may still be live elsewhere, and fences would
// start again at 1. Used by test fixtures, examples and benchmarks so they
// need not wait the window. An admin does the same with
// `redis-cli SET dlock:data-set-began 0`.
std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys);

// The three keys of one resource (KeyScheme's LockKey, FenceKey and
// ChannelKey), built once into one buffer that lives inline for a prefix
// and resource of up to about 50 bytes together: an operation builds it on
// the stack and sends views of it, without a heap allocation per key.
class ResourceKeys {
 public:
  ResourceKeys(absl::string_view prefix, absl::string_view resource);
  ResourceKeys(const ResourceKeys&) = delete;
  ResourceKeys& operator=(const ResourceKeys&) = delete;

  absl::string_view lock() const { return {buf_.data(), lock_len_}; }
  absl::string_view fence() const { return {buf_.data(), lock_len_ + kFence.size()}; }
  absl::string_view channel() const {
    return {buf_.data() + lock_len_ + kFence.size(), lock_len_ + kReleased.size()};
  }

 private:
  static constexpr absl::string_view kFence = ":fence";
  static constexpr absl::string_view kReleased = ":released";
  // "P{R}:fence" followed by "P{R}:released".
  absl::InlinedVector<char, 128> buf_;
  size_t lock_len_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_KEYS_H_
