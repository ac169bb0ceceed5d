#include "dlock/lock/keys.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

// True when P{R}... has a non-empty first hash tag: the first '{' of
// P + "{" + R + "}" is not followed at once by '}'.
bool ClassicLayoutIsSound(absl::string_view prefix, absl::string_view resource) {
  const size_t open = prefix.find('{');
  if (open == absl::string_view::npos) {
    return !resource.empty() && resource[0] != '}';
  }
  // The prefix holds the first '{': what follows it is in the prefix, or is
  // the scheme's own '{' (never '}').
  return open + 1 >= prefix.size() || prefix[open + 1] != '}';
}

std::string Key(absl::string_view prefix, absl::string_view resource,
                absl::string_view kind) {
  if (ClassicLayoutIsSound(prefix, resource)) {
    return absl::StrCat(prefix, "{", resource, kind.empty() ? "}" : "}:", kind);
  }
  const int slot = Crc16(resource) & (kClusterSlots - 1);
  return absl::StrCat(prefix, "#{", SlotTag(slot), "}:",
                      kind.empty() ? "lock" : kind, ":", resource);
}

}  // namespace

std::string KeyScheme::LockKey(absl::string_view resource) const {
  return Key(prefix, resource, "");
}
std::string KeyScheme::FenceKey(absl::string_view resource) const {
  return Key(prefix, resource, "fence");
}
std::string KeyScheme::ChannelKey(absl::string_view resource) const {
  return Key(prefix, resource, "released");
}

std::string KeyScheme::DataSetKey() const {
  return absl::StrCat(prefix, "data-set-began");
}

std::string KeyScheme::SlotDataSetKey(int slot) const {
  return absl::StrCat(prefix, "data-set-began:{", SlotTag(slot), "}");
}

std::string KeyScheme::DataSetKey(absl::string_view resource) const {
  if (!per_slot_data_set) return DataSetKey();
  return SlotDataSetKey(KeySlot(LockKey(resource)));
}

std::string KeyScheme::FenceHwmKey() const {
  return absl::StrCat(prefix, "fence-hwm");
}

std::string KeyScheme::SlotFenceHwmKey(int slot) const {
  return absl::StrCat(prefix, "fence-hwm:{", SlotTag(slot), "}");
}

std::string KeyScheme::FenceHwmKey(absl::string_view resource) const {
  if (!per_slot_data_set) return FenceHwmKey();
  return SlotFenceHwmKey(KeySlot(LockKey(resource)));
}

ResourceKeys::ResourceKeys(absl::string_view prefix, absl::string_view resource) {
  if (!ClassicLayoutIsSound(prefix, resource)) {
    // The rare layout (see keys.h): built as KeyScheme builds it.
    const std::string k[] = {Key(prefix, resource, ""), Key(prefix, resource, "fence"),
                             Key(prefix, resource, "released")};
    buf_.resize(k[0].size() + k[1].size() + k[2].size());
    std::memcpy(buf_.data(), k[0].data(), k[0].size());
    std::memcpy(buf_.data() + k[0].size(), k[1].data(), k[1].size());
    std::memcpy(buf_.data() + k[0].size() + k[1].size(), k[2].data(), k[2].size());
    lock_len_ = k[0].size();
    fence_off_ = k[0].size();
    fence_len_ = k[1].size();
    channel_off_ = k[0].size() + k[1].size();
    channel_len_ = k[2].size();
    return;
  }
  // "P{R}:fence" followed by "P{R}:released": the lock key is the first's
  // beginning.
  static constexpr absl::string_view kFence = ":fence";
  static constexpr absl::string_view kReleased = ":released";
  lock_len_ = prefix.size() + resource.size() + 2;
  fence_len_ = lock_len_ + kFence.size();
  channel_off_ = fence_len_;
  channel_len_ = lock_len_ + kReleased.size();
  buf_.resize(fence_len_ + channel_len_);
  char* out = buf_.data();
  auto put = [&out](absl::string_view piece) {
    if (!piece.empty()) std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  };
  for (absl::string_view suffix : {kFence, kReleased}) {
    put(prefix);
    *out++ = '{';
    put(resource);
    *out++ = '}';
    put(suffix);
  }
}

std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys) {
  return {"SET", keys.DataSetKey(), "0"};
}

std::vector<std::vector<std::string>> TrustClusterDataSetCommands(
    const KeyScheme& keys) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(kClusterSlots);
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    commands.push_back({"SET", keys.SlotDataSetKey(slot), "0"});
  }
  return commands;
}

}  // namespace dlock
