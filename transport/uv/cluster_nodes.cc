#include "dlock/transport/uv/cluster_nodes.h"

#include <utility>

namespace dlock {

absl::StatusOr<Transport*> ClusterNodes::Get(const std::string& address) {
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return it->second.get();
  absl::StatusOr<ClusterEndpoint> e = ParseClusterEndpoint(address);
  if (!e.ok()) return e.status();
  absl::StatusOr<std::unique_ptr<Transport>> node = factory_(e->host, e->port);
  if (!node.ok()) return node.status();
  Transport* raw = node->get();
  nodes_[address] = *std::move(node);
  return raw;
}

std::string ClusterNodes::PreferConnected(const std::vector<std::string>& addresses) const {
  // A dead master keeps its slots in the map until the cluster fails it
  // over: a connected one is better.
  std::string address;
  for (const std::string& a : addresses) {
    auto node = nodes_.find(a);
    if (address.empty()) address = a;
    if (node != nodes_.end() && node->second->connected()) return a;
  }
  return address;
}

std::vector<std::string> ClusterNodes::Addresses() const {
  std::vector<std::string> out;
  out.reserve(nodes_.size());
  for (const auto& [address, node] : nodes_) out.push_back(address);
  return out;
}

void ClusterNodes::Prune(absl::FunctionRef<bool(const std::string&)> keep) {
  std::vector<std::string> gone;
  for (const auto& [address, node] : nodes_) {
    if (node->pending_commands() > 0 || keep(address)) continue;
    gone.push_back(address);
  }
  for (const std::string& address : gone) nodes_.erase(address);
}

void ClusterNodes::CloseAll() {
  for (auto& [address, node] : nodes_) node->Close();
}

}  // namespace dlock
