// The checks of connection_options.h.
#include "dlock/transport/uv/connection_options.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

bool IsForbiddenCommand(absl::string_view name) {
  // Fast path (every command passes here): all of them start with one of
  // these letters and are 7 to 12 bytes long.
  if (name.size() < 7 || name.size() > 12) return false;
  switch (name[0] | 0x20) {
    case 's': case 'p': case 'u': case 'm': break;
    default: return false;
  }
  for (const char* c : {"SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "MONITOR",
                        "SSUBSCRIBE", "SUNSUBSCRIBE"}) {
    if (absl::EqualsIgnoreCase(name, c)) return true;
  }
  return false;
}

}  // namespace

absl::Status ValidateSendArguments(size_t argc, absl::string_view command,
                                   absl::Duration timeout, bool has_callback) {
  if (argc == 0) return absl::InvalidArgumentError("empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!has_callback) return absl::InvalidArgumentError("null callback");
  if (argc > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("too many arguments");
  }
  if (IsForbiddenCommand(command)) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, " changes the connection's protocol; use Subscribe"));
  }
  return absl::OkStatus();
}

absl::Status ValidateConnectionOptions(const HiredisTransportOptions& options) {
  if (options.unix_socket.empty()) {
    if (options.host.empty()) return absl::InvalidArgumentError("empty host");
    if (options.port < 1 || options.port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port ", options.port));
    }
  }
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError("username without password");
  }
  if (options.db < 0) return absl::InvalidArgumentError("negative db");
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= absl::ZeroDuration() ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return absl::InvalidArgumentError(
        "need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (!(options.reconnect_jitter >= 0 && options.reconnect_jitter <= 1)) {
    return absl::InvalidArgumentError("reconnect_jitter must be in [0, 1]");
  }
  return absl::OkStatus();
}

}  // namespace dlock
