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

std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys) {
  return {"SET", keys.DataSetKey(), "0"};
}

}  // namespace dlock
