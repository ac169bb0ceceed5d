#include "dlock/lock/keys.h"

#include <cstring>

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
  buf_.resize(2 * lock_len_ + kFence.size() + kReleased.size());
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

}  // namespace dlock
