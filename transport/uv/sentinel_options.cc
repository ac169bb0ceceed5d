#include "dlock/transport/uv/sentinel_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock {

std::string SentinelHostPort(absl::string_view host, int port) {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

absl::Status ValidateSentinelOptions(const SentinelTransportOptions& options) {
  if (options.sentinels.empty()) {
    return absl::InvalidArgumentError("Sentinel: at least one sentinel is needed");
  }
  if (options.master_name.empty()) {
    return absl::InvalidArgumentError("Sentinel: the master name must not be empty");
  }
  if (options.query_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("Sentinel: query_timeout must be positive");
  }
  HiredisTransportOptions check = options.master;
  check.unix_socket.clear();
  check.host = "master";
  check.port = 6379;
  absl::Status s = ValidateConnectionOptions(check);
  if (!s.ok()) return s;
  for (const SentinelTransportOptions::Endpoint& e : options.sentinels) {
    if (e.host.empty() || e.port < 1 || e.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sentinel: bad sentinel address ", SentinelHostPort(e.host, e.port)));
    }
  }
  return absl::OkStatus();
}

}  // namespace dlock
