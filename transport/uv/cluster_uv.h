// This header defines `CreateUvClusterTransport`: a `ClusterTransport`
// (cluster_transport.h) whose node transports are `HiredisTransport`s on a
// libuv loop, one per master, all with the same connection options
// (credentials, timeouts, backoff; host and port come from the slot map).
//
//   ClusterUvOptions o;
//   o.cluster.seeds = {{"10.0.0.1", 7000}, {"10.0.0.2", 7001}};
//   auto t = CreateUvClusterTransport(uv_loop, std::move(o));
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_UV_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_UV_H_

#include <memory>

#include "absl/status/statusor.h"
#include "dlock/transport/uv/cluster_transport.h"
#include "dlock/transport/uv/hiredis_transport.h"

struct uv_loop_s;

namespace dlock {

struct ClusterUvOptions {
  ClusterTransportOptions cluster;
  // Every node connection's options; host, port and unix_socket are
  // ignored, db must be 0 (a cluster has only database 0).
  HiredisTransportOptions node;
};

// kInvalidArgument for bad options (see ClusterTransport::Create and
// ValidateConnectionOptions, db != 0). `loop` must outlive the transport.
absl::StatusOr<std::unique_ptr<ClusterTransport>> CreateUvClusterTransport(
    uv_loop_s* loop, ClusterUvOptions options);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_UV_H_
