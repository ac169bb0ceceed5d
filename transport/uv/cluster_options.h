// This header defines the settings of a `ClusterTransport`
// (cluster_transport.h, which includes this header): its seeds, timeouts
// and limits, the factory of its node connections, and the "host:port"
// node addresses the slot map names.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_OPTIONS_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"

namespace dlock {

// Makes the transport to one node. Called on the loop's thread.
using ClusterNodeFactory = absl::AnyInvocable<absl::StatusOr<std::unique_ptr<Transport>>(
    const std::string& host, int port)>;

struct ClusterEndpoint {
  std::string host;
  int port = 0;
};

struct ClusterTransportOptions {
  // Nodes asked for the slot map first (at least one).
  std::vector<ClusterEndpoint> seeds;
  // Bound on one CLUSTER SLOTS question.
  absl::Duration topology_timeout = absl::Seconds(2);
  // Periodic slot-map refresh; zero or negative: none.
  absl::Duration refresh_interval = absl::Seconds(10);
  // Resends per command after MOVED.
  int max_redirects = 8;
  // Delay before resending after TRYAGAIN/CLUSTERDOWN.
  absl::Duration retry_delay = absl::Milliseconds(50);
};

// Checks `options` for ClusterTransport::Create: kInvalidArgument when
// there is no seed, a seed has no host or a port outside 1..65535, or
// topology_timeout or retry_delay is not positive, or max_redirects < 1.
absl::Status ValidateClusterOptions(const ClusterTransportOptions& options);

// Checks one ClusterTransport::Send's arguments: a non-empty command that
// neither changes the connection's protocol (SUBSCRIBE & co., MONITOR: use
// Subscribe) nor the node's state behind the router (ASKING, SELECT), a
// positive timeout, a callback. kInvalidArgument naming what is wrong.
absl::Status ValidateClusterSend(const std::vector<std::string>& argv,
                                 absl::Duration timeout, bool has_callback);

// Parses "host:port" (the port after the last ':'; "[v6]:port" too).
absl::StatusOr<ClusterEndpoint> ParseClusterEndpoint(absl::string_view address);

// "host:port", the form node addresses take in the slot map and the pool.
std::string ClusterAddress(absl::string_view host, int64_t port);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_OPTIONS_H_
