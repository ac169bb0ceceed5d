// This header defines `ClusterNodes`, the node connections of a
// ClusterTransport (cluster_transport.h): one transport per node address
// ("host:port"), made by the node factory on first use and kept until
// pruned or the pool is destroyed.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_NODES_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_NODES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/cluster_options.h"

namespace dlock {

class ClusterNodes {
 public:
  explicit ClusterNodes(ClusterNodeFactory factory) : factory_(std::move(factory)) {}
  ClusterNodes(const ClusterNodes&) = delete;
  ClusterNodes& operator=(const ClusterNodes&) = delete;

  // The connection to `address`, made on first use: kInvalidArgument when
  // `address` is not host:port, or the factory's failure.
  absl::StatusOr<Transport*> Get(const std::string& address);
  // The first of `addresses` whose connection is up, else the first; ""
  // when `addresses` is empty.
  std::string PreferConnected(const std::vector<std::string>& addresses) const;
  // The address of every connection held.
  std::vector<std::string> Addresses() const;

  // Destroys the connections `keep` rejects that have no command pending
  // (their callbacks are still due). Allowed inside a node's own callback.
  void Prune(absl::FunctionRef<bool(const std::string&)> keep);
  // Closes every connection (each fails its own pending commands).
  void CloseAll();
  // Destroys every connection.
  void Clear() { nodes_.clear(); }
  size_t size() const { return nodes_.size(); }

 private:
  ClusterNodeFactory factory_;
  absl::flat_hash_map<std::string, std::unique_ptr<Transport>> nodes_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_NODES_H_
