#include "dlock/transport/uv/cluster_slot_map.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_options.h"

namespace dlock {
namespace {

bool IsKeyless(absl::string_view name) {
  static const char* const kKeyless[] = {
      "PING",   "INFO",    "TIME",   "CLUSTER", "ROLE",  "SCRIPT", "PUBLISH",
      "CONFIG", "DBSIZE",  "ECHO",   "AUTH",    "HELLO", "CLIENT", "COMMAND",
      "LASTSAVE", "MEMORY", "SLOWLOG", "LATENCY", "ACL", "FUNCTION", "WAIT",
      "READONLY", "READWRITE", "ASKING", "SPUBLISH"};
  for (const char* k : kKeyless) {
    if (absl::EqualsIgnoreCase(name, k)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<int> CommandSlot(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  const std::string& name = argv[0];
  if (absl::EqualsIgnoreCase(name, "EVAL") || absl::EqualsIgnoreCase(name, "EVALSHA") ||
      absl::EqualsIgnoreCase(name, "EVAL_RO") || absl::EqualsIgnoreCase(name, "EVALSHA_RO")) {
    int64_t numkeys = 0;
    if (argv.size() < 3 || !absl::SimpleAtoi(argv[2], &numkeys) || numkeys < 0 ||
        numkeys > static_cast<int64_t>(argv.size()) - 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": numkeys missing or larger than the arguments"));
    }
    if (numkeys == 0) return -1;
    const int slot = KeySlot(argv[3]);
    for (int64_t i = 1; i < numkeys; ++i) {
      if (KeySlot(argv[3 + i]) != slot) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": keys in different Redis Cluster slots (", argv[3], " in ", slot,
            ", ", argv[3 + i], " in ", KeySlot(argv[3 + i]),
            "); give them one hash tag"));
      }
    }
    return slot;
  }
  if (argv.size() < 2 || IsKeyless(name)) return -1;
  return KeySlot(argv[1]);
}

ClusterSlotMap::ClusterSlotMap() : slots_(kClusterSlots) {}

void ClusterSlotMap::Load(const Reply& reply, const std::string& asked_host) {
  std::vector<std::string> slots(kClusterSlots);
  for (const Reply& range : reply.elements) {
    if (range.elements.size() < 3 || !range.elements[0].is_integer() ||
        !range.elements[1].is_integer() || range.elements[2].elements.size() < 2) {
      continue;
    }
    const Reply& master = range.elements[2];
    std::string host = master.elements[0].str;
    if (host.empty() || host == "?") host = asked_host;
    const std::string address = ClusterAddress(host, master.elements[1].integer);
    const int64_t from = std::max<int64_t>(0, range.elements[0].integer);
    const int64_t to = std::min<int64_t>(kClusterSlots - 1, range.elements[1].integer);
    for (int64_t s = from; s <= to; ++s) slots[s] = address;
  }
  slots_ = std::move(slots);
}

void ClusterSlotMap::SetOwner(int slot, std::string address) {
  if (slot >= 0 && slot < kClusterSlots) slots_[slot] = std::move(address);
}

const std::string& ClusterSlotMap::OwnerOf(int slot) const {
  static const std::string* const kNone = new std::string();
  if (slot < 0 || slot >= kClusterSlots) return *kNone;
  return slots_[slot];
}

std::vector<std::string> ClusterSlotMap::Masters() const {
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& s : slots_) {
    if (!s.empty() && seen.insert(s).second) out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dlock
