#include "dlock/transport/uv/cluster_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dlock {

absl::StatusOr<ClusterEndpoint> ParseClusterEndpoint(absl::string_view address) {
  const size_t colon = address.rfind(':');
  ClusterEndpoint e;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &e.port) || e.port < 1 ||
      e.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster node address '", address, "' is not host:port"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  e.host = std::string(host);
  return e;
}

std::string ClusterAddress(absl::string_view host, int64_t port) {
  return absl::StrCat(host, ":", port);
}

}  // namespace dlock
