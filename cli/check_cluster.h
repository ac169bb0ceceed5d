// This header defines the Redis Cluster part of `dlock check`: the facts
// gathered from a cluster (CLUSTER INFO, CLUSTER NODES, and per master the
// same facts as a standalone server) and the rules that judge them.
//
//   rule               | safe                       | unsafe / warning
//   -------------------+----------------------------+---------------------------
//   cluster_state      | ok                         | fail: UNSAFE (locks on
//                      |                            | uncovered slots refused)
//   slots              | all 16384 assigned and ok  | fewer: UNSAFE
//   nodes              | none flagged fail          | fail/pfail: warning
//   replicas per master| >= 1: INFO (failover keeps | 0: warning (a master's
//                      | the slots available; a     | failure stops its slots
//                      | lease granted less than the| until it returns; without
//                      | replication lag before the | persistence its leases and
//                      | master died can be lost:   | fences are lost)
//                      | asynchronous replication)  |
//   each master        | AnalyzeServer (check.h): version, role, scripting,
//                      | maxmemory-policy, persistence, latency; and
//                      | min-replicas-to-write: >= 1 ok, 0 warning (a
//                      | master cut off from its replicas keeps granting
//                      | leases its promoted replica will not have)
//
// Pure functions; thread-safe.
#ifndef DLOCK_CLI_CHECK_CLUSTER_H_
#define DLOCK_CLI_CHECK_CLUSTER_H_

#include <string>
#include <vector>

#include "dlock/cli/check.h"

namespace dlock {
namespace cli {

struct ClusterNodeFacts {
  std::string id;
  std::string address;    // "host:port"
  bool master = false;
  std::string master_id;  // replicas: the id of their master
  bool failed = false;    // flagged fail or fail?
  int slots = 0;          // masters: slots served
};

struct ClusterFacts {
  std::string state;  // cluster_state; empty if unknown
  int slots_assigned = -1;
  int slots_ok = -1;
  std::vector<ClusterNodeFacts> nodes;
};

// Parses CLUSTER INFO ("field:value" lines) and CLUSTER NODES (one node per
// line: id addr@bus flags master-id ping pong epoch link slots...).
ClusterFacts ParseClusterFacts(const std::string& cluster_info,
                               const std::string& cluster_nodes);

// Judges the cluster as a whole (not its masters one by one:
// AnalyzeClusterMaster).
std::vector<Finding> AnalyzeCluster(const ClusterFacts& facts);

// Judges one master of the cluster: AnalyzeServer (not RedLock) plus its
// min-replicas-to-write (AnalyzeMinReplicasToWrite; unreadable: no finding,
// AnalyzeServer already reports an unreadable CONFIG).
std::vector<Finding> AnalyzeClusterMaster(const ServerFacts& facts, absl::Duration ttl);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_CHECK_CLUSTER_H_
