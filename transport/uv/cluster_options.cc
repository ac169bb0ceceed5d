#include "dlock/transport/uv/cluster_options.h"

#include "absl/strings/match.h"
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

absl::Status ValidateClusterOptions(const ClusterTransportOptions& options) {
  if (options.seeds.empty()) return absl::InvalidArgumentError("cluster: no seed node");
  for (const ClusterEndpoint& s : options.seeds) {
    if (s.host.empty() || s.port < 1 || s.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster: bad seed '", s.host, ":", s.port, "'"));
    }
  }
  if (options.topology_timeout <= absl::ZeroDuration() ||
      options.retry_delay <= absl::ZeroDuration() || options.max_redirects < 1) {
    return absl::InvalidArgumentError(
        "cluster: topology_timeout and retry_delay must be positive, max_redirects >= 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateClusterSend(const std::vector<std::string>& argv,
                                 absl::Duration timeout, bool has_callback) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!has_callback) return absl::InvalidArgumentError("null callback");
  for (const char* banned : {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE",
                             "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR", "ASKING",
                             "SELECT"}) {
    if (absl::EqualsIgnoreCase(argv[0], banned)) {
      return absl::InvalidArgumentError(
          absl::StrCat(argv[0], " is not sent through a cluster transport"));
    }
  }
  return absl::OkStatus();
}

std::string ClusterAddress(absl::string_view host, int64_t port) {
  return absl::StrCat(host, ":", port);
}

}  // namespace dlock
