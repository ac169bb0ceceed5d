// This header defines the settings of a `SentinelTransport`
// (sentinel_transport.h, which includes this header): the sentinels, the
// master's name, the connection settings, and the factory of connections.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_OPTIONS_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_OPTIONS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {

struct SentinelTransportOptions {
  struct Endpoint {
    std::string host;
    int port = 26379;
  };
  // At least one sentinel of the master.
  std::vector<Endpoint> sentinels;
  // The name the sentinels monitor the master under (`sentinel monitor
  // <name> ...`); non-empty.
  std::string master_name;
  // The sentinels' own AUTH (empty: none).
  std::string sentinel_username;
  std::string sentinel_password;
  // The data nodes' connection settings: AUTH, db, timeouts, backoff. Host,
  // port and unix_socket are ignored (discovered).
  HiredisTransportOptions master;
  // Connect to the master over TLS with these settings (sentinels: plain).
  bool tls = false;
  TlsOptions tls_options;
  // Bound on each question to a sentinel and on the ROLE check.
  absl::Duration query_timeout = absl::Seconds(1);
};

// Makes one connection: to a sentinel (`sentinel` true) or a data node.
using SentinelConnectionFactory = absl::AnyInvocable<absl::StatusOr<std::unique_ptr<Transport>>(
    const std::string& host, int port, bool sentinel)>;

// kInvalidArgument for no sentinel, an empty master name, a sentinel
// without host or with a port outside 1..65535, a non-positive
// query_timeout, or bad master connection options.
absl::Status ValidateSentinelOptions(const SentinelTransportOptions& options);

// "host:port", "[v6]:port" for an IPv6 host.
std::string SentinelHostPort(absl::string_view host, int port);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_OPTIONS_H_
