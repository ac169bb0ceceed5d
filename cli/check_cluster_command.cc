// `dlock check` of a redis-cluster:// URL: CLUSTER INFO and CLUSTER NODES
// judged by AnalyzeCluster, then every master reached through the cluster
// transport's node connection and judged like a standalone server plus its
// min-replicas-to-write (AnalyzeClusterMaster).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/cli/check_cluster.h"
#include "dlock/cli/check_gather.h"

namespace dlock {
namespace cli {

void CheckCluster(Session& s, size_t i, const KeyScheme& keys, absl::Duration ttl, int pings,
                  int* unsafe, int* warnings, int* unreachable) {
  const std::string where = s.urls()[i].Display();
  absl::StatusOr<Reply> info = s.Call(i, {"CLUSTER", "INFO"});
  absl::StatusOr<Reply> nodes = s.Call(i, {"CLUSTER", "NODES"});
  if (!info.ok() || !nodes.ok() || info->is_error() || nodes->is_error()) {
    const std::string why = !info.ok()          ? info.status().ToString()
                            : !nodes.ok()       ? nodes.status().ToString()
                            : info->is_error()  ? info->str
                                                : nodes->str;
    std::printf("  UNREACHABLE  %s\n", why.c_str());
    std::fprintf(stderr, "dlock: %s: unreachable: %s\n", where.c_str(), why.c_str());
    ++*unreachable;
    return;
  }
  const ClusterFacts facts = ParseClusterFacts(info->str, nodes->str);
  PrintFindings(AnalyzeCluster(facts), where, unsafe, warnings);
  for (const ClusterNodeFacts& n : facts.nodes) {
    if (!n.master || n.slots == 0) continue;
    ServerFacts f;
    f.address = n.address;
    std::printf("master %s\n", n.address.c_str());
    Transport* node = s.cluster(i)->Node(n.address);
    absl::Status e = node == nullptr
                         ? absl::UnavailableError("no connection")
                         : GatherServerFacts(s, *node, keys, pings, &f);
    if (!e.ok()) {
      std::printf("  UNREACHABLE  %s\n", e.ToString().c_str());
      std::fprintf(stderr, "dlock: %s: unreachable: %s\n", n.address.c_str(),
                   e.ToString().c_str());
      ++*unreachable;
      continue;
    }
    PrintFindings(AnalyzeClusterMaster(f, ttl), n.address, unsafe, warnings);
  }
}

}  // namespace cli
}  // namespace dlock
