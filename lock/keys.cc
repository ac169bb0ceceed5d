#include "dlock/lock/keys.h"

#include "absl/strings/str_cat.h"

namespace dlock {

std::string KeyScheme::LockKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}");
}
std::string KeyScheme::FenceKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}:fence");
}
std::string KeyScheme::ChannelKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}:released");
}

std::string KeyScheme::DataSetKey() const {
  return absl::StrCat(prefix, "data-set-began");
}

ResourceKeys::ResourceKeys(absl::string_view prefix, absl::string_view resource)
    : lock_len_(prefix.size() + resource.size() + 2) {
  buf_.reserve(2 * lock_len_ + kFence.size() + kReleased.size());
  for (absl::string_view suffix : {kFence, kReleased}) {
    for (absl::string_view piece : {prefix, absl::string_view("{"), resource,
                                    absl::string_view("}"), suffix}) {
      buf_.insert(buf_.end(), piece.begin(), piece.end());
    }
  }
}

std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys) {
  return {"SET", keys.DataSetKey(), "0"};
}

}  // namespace dlock
