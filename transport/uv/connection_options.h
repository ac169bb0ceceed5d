// This header defines `HiredisTransportOptions`, the connection settings
// HiredisTransport and TlsTransport share (endpoint, AUTH, SELECT, timeouts,
// reconnect backoff; see hiredis_transport.h for what they do), and the
// checks both transports run on them and on each Send.
#ifndef DLOCK_TRANSPORT_UV_CONNECTION_OPTIONS_H_
#define DLOCK_TRANSPORT_UV_CONNECTION_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

struct HiredisTransportOptions {
  // TCP endpoint: a host name or an IPv4/IPv6 literal, and a port. A name
  // is resolved on every attempt (uv_getaddrinfo); its first IPv4 address
  // is used, else its first address.
  std::string host = "127.0.0.1";
  int port = 6379;
  // When non-empty, connect to this unix socket instead of host:port.
  std::string unix_socket;

  // When non-empty, `AUTH password` (or `AUTH username password` when
  // `username` is non-empty: a Redis 6+ ACL user) runs first on every
  // connection. A username without a password is an invalid option.
  std::string username;
  std::string password;

  // When not 0, `SELECT db` runs on every command connection.
  int db = 0;

  // Bound on one connection attempt (resolve, connect, AUTH, SELECT).
  absl::Duration connect_timeout = absl::Seconds(5);

  // Reconnect backoff after failed attempts (see the header comment).
  absl::Duration reconnect_backoff_min = absl::Milliseconds(100);
  absl::Duration reconnect_backoff_max = absl::Seconds(5);
  // Fraction of the backoff that is randomized, in [0, 1].
  double reconnect_jitter = 0.5;
};

// Checks the connection options shared by HiredisTransport and TlsTransport
// (address, credentials, db, timeouts, backoff): kInvalidArgument naming the
// first bad field. Both transports' Create call it.
absl::Status ValidateConnectionOptions(const HiredisTransportOptions& options);

// Checks one Send's arguments the same way for HiredisTransport and
// TlsTransport: a non-empty command that does not change the connection's
// protocol (SUBSCRIBE & co., MONITOR: use Subscribe), a positive timeout, a
// callback. kInvalidArgument naming what is wrong.
absl::Status ValidateSendArguments(size_t argc, absl::string_view command,
                                   absl::Duration timeout, bool has_callback);
inline absl::Status ValidateSendArguments(const std::vector<std::string>& argv,
                                          absl::Duration timeout, bool has_callback) {
  return ValidateSendArguments(argv.size(),
                               argv.empty() ? absl::string_view() : argv[0],
                               timeout, has_callback);
}

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CONNECTION_OPTIONS_H_
