// This header defines Redis Cluster's key-to-slot rule, shared by the key
// layout (//lock:keys), which must keep every key of a resource in one slot,
// and the cluster transport (//transport/uv:cluster_transport), which routes
// a command to the node owning its first key's slot.
//
//   KeySlot(key)   CRC16(tag) mod 16384, where tag is the part of `key`
//                  between its first '{' and the first '}' after it when
//                  that part is non-empty, else the whole key (Redis's
//                  cluster specification, "Hash tags").
//   SlotTag(s)     a short string t (no braces) with KeySlot(t) == s: a key
//                  containing "{t}" as its first tag lands in slot s. Used
//                  for the per-slot data-set marker and for resources whose
//                  name would leave the hash tag empty.
//
// Pure functions, thread-safe.
#ifndef DLOCK_TRANSPORT_CLUSTER_SLOT_H_
#define DLOCK_TRANSPORT_CLUSTER_SLOT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace dlock {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XModem: polynomial 0x1021, initial value 0, no reflection),
// the checksum Redis Cluster hashes keys with. Crc16("123456789") == 0x31C3.
uint16_t Crc16(absl::string_view data);

// The slot of `key` in [0, kClusterSlots), hash tags honoured.
int KeySlot(absl::string_view key);

// The part of `key` that KeySlot hashes: the non-empty text between the first
// '{' and the first '}' after it, else the whole key.
absl::string_view HashTagOf(absl::string_view key);

// A short tag (digits and lowercase letters, at most 4 characters) whose
// slot is `slot`; `slot` must be in [0, kClusterSlots). The table of all
// 16384 tags is built once, on first use (a few milliseconds).
const std::string& SlotTag(int slot);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_CLUSTER_SLOT_H_
