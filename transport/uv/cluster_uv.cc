#include "dlock/transport/uv/cluster_uv.h"

#include <string>
#include <utility>

#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {

absl::StatusOr<std::unique_ptr<ClusterTransport>> CreateUvClusterTransport(
    uv_loop_s* loop, ClusterUvOptions options) {
  if (loop == nullptr) return absl::InvalidArgumentError("cluster: null uv loop");
  if (options.node.db != 0) {
    return absl::InvalidArgumentError("cluster: a Redis Cluster has only database 0");
  }
  HiredisTransportOptions node = std::move(options.node);
  node.unix_socket.clear();
  if (!options.cluster.seeds.empty()) {  // validated with the first seed's address
    node.host = options.cluster.seeds[0].host;
    node.port = options.cluster.seeds[0].port;
  }
  absl::Status s = ValidateConnectionOptions(node);
  if (!s.ok()) return s;
  auto timers = std::make_unique<UvEventLoop>(loop);
  EventLoop* raw = timers.get();
  ClusterNodeFactory factory =
      [loop, node](const std::string& host, int port)
      -> absl::StatusOr<std::unique_ptr<Transport>> {
    HiredisTransportOptions o = node;
    o.host = host;
    o.port = port;
    absl::StatusOr<std::unique_ptr<HiredisTransport>> t = HiredisTransport::Create(loop, o);
    if (!t.ok()) return t.status();
    return std::unique_ptr<Transport>(*std::move(t));
  };
  return ClusterTransport::Create(raw, std::move(options.cluster), std::move(factory),
                                  std::move(timers));
}

}  // namespace dlock
