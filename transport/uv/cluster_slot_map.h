// This header defines `ClusterSlotMap`, the slot map of a Redis Cluster
// (which master serves each of the 16384 slots, as `CLUSTER SLOTS`
// reports it), and `CommandSlot`, the slot that routes a command. Both are
// parts of ClusterTransport (cluster_transport.h states the routing rules).
//
// ClusterSlotMap is thread-compatible; the functions are thread-safe.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_SLOT_MAP_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_SLOT_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/reply.h"

namespace dlock {

// The slot of `argv`'s first key (the first KEYS entry for
// EVAL/EVALSHA[_RO]); -1 when the command has none; kInvalidArgument for an
// empty argv, a malformed numkeys, or script keys in different slots.
absl::StatusOr<int> CommandSlot(const std::vector<std::string>& argv);

class ClusterSlotMap {
 public:
  // Every slot unknown.
  ClusterSlotMap();

  // Replaces the map by the ranges of a `CLUSTER SLOTS` reply (malformed
  // ranges are skipped); a master announced without a host ("" or "?") is
  // at `asked_host`, the node that answered.
  void Load(const Reply& slots, const std::string& asked_host);
  // Names `address` the owner of `slot` (a MOVED reply).
  void SetOwner(int slot, std::string address);

  // "host:port" of the master serving `slot`, "" if none or out of range.
  const std::string& OwnerOf(int slot) const;
  // Every master the map names, sorted.
  std::vector<std::string> Masters() const;

 private:
  std::vector<std::string> slots_;  // slot -> "host:port" ("" unknown)
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_SLOT_MAP_H_
