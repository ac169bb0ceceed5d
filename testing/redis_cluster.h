// This header defines `RedisCluster`, a test fixture that runs a private
// Redis Cluster on loopback: `masters` cluster-enabled redis-server
// processes plus `replicas_per_master` replicas each (3 + 3 by default),
// joined by `redis-cli --cluster create ... --cluster-replicas N
// --cluster-yes`, and waits until every node reports cluster_state:ok and
// the same slot map. The destructor stops every node.
//
// Each node is a `RedisServer` (redis_server.h): its own directory under
// $TEST_TMPDIR, no persistence, killed if the test dies. The cluster bus
// port of each node is picked free like its client port (`--cluster-port`),
// so nodes may use any client port. `cluster-node-timeout` is low (2 s by
// default) so failovers finish in a few seconds.
//
// Unless `trusted_data_set_prefixes` is cleared, every slot's data-set
// marker is declared trusted on start (dlock::TrustClusterDataSetCommands),
// so locks are granted at once and fences start at 1.
//
//   ASSERT_OK_AND_ASSIGN(auto cluster, RedisCluster::Start({}));
//   url = cluster->url();   // "redis-cluster://127.0.0.1:p1,127.0.0.1:p2,..."
//
// Helpers drive the scenarios the cluster tests need: which node owns a
// slot, move a slot (MIGRATING/IMPORTING, MIGRATE of its keys, SETSLOT
// NODE), fail a master over to its replica.
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_REDIS_CLUSTER_H_
#define DLOCK_TESTING_REDIS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/testing/redis_server.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace test_support {

struct RedisClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  // cluster-node-timeout: how long a node may be unreachable before it is
  // failed. A manual failover does not wait for it; below 2 s, late
  // heartbeats on a loaded 2-core machine made replicas suspect their
  // masters (CLUSTER FAILOVER then refuses).
  absl::Duration node_timeout = absl::Seconds(2);
  // Appended to every node's command line.
  std::vector<std::string> extra_args;
  // Declared trusted on start (every slot's marker, see keys.h).
  std::vector<std::string> trusted_data_set_prefixes = {"dlock:"};
  // Bound on start (processes, create, agreement) and on each wait below.
  absl::Duration timeout = absl::Seconds(30);
};

class RedisCluster {
 public:
  // kNotFound when redis-server or redis-cli is missing; kUnavailable (with
  // the failing node's log tail) when the cluster does not form in time.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(
      RedisClusterOptions options = {});
  ~RedisCluster();

  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // "redis-cluster://127.0.0.1:p1,...": every node as a seed.
  std::string url() const;
  int size() const { return static_cast<int>(nodes_.size()); }
  RedisServer& node(int i) { return *nodes_[i]; }
  // The node's cluster id (CLUSTER MYID).
  const std::string& node_id(int i) const { return ids_[i]; }

  // Runs one command on node i.
  absl::StatusOr<Reply> Command(int i, std::vector<std::string> argv);

  // The index of the node that node `asker` believes owns `slot`
  // (CLUSTER SLOTS), or kNotFound.
  absl::StatusOr<int> OwnerOf(int slot, int asker = 0);
  // The indexes of the nodes owning slots (per node `asker`), ascending.
  absl::StatusOr<std::vector<int>> Masters(int asker = 0);
  // The index of a replica of master `i` (CLUSTER REPLICAS), or kNotFound.
  absl::StatusOr<int> ReplicaOf(int i);

  // Waits until every running node says cluster_state:ok, all of them
  // report the same slot owners, and each sees every other running node
  // that owns no slot as a live replica.
  absl::Status WaitHealthy();

  // Starts moving `slot` from its owner to master `to`: SETSLOT IMPORTING
  // on `to`, MIGRATING on the owner. Keys stay on the owner until
  // MigrateKeys; meanwhile the owner answers ASK for keys it lacks.
  absl::Status BeginSlotMigration(int slot, int to);
  // MIGRATEs every key of `slot` still on its owner to `to`.
  absl::Status MigrateKeys(int slot, int to);
  // SETSLOT NODE on every master: `to` owns the slot, the old owner answers
  // MOVED from now on.
  absl::Status FinishSlotMigration(int slot, int to);

  // CLUSTER FAILOVER on a replica of master `i` (again whenever a manual
  // failover timed out); waits until the replica is master and every node
  // agrees. Returns the new master's index.
  absl::StatusOr<int> Failover(int i);

 private:
  explicit RedisCluster(RedisClusterOptions options) : options_(std::move(options)) {}
  absl::Status Create();
  absl::Status Trust();
  absl::StatusOr<std::vector<int>> SlotOwners(int asker);
  int IndexOfPort(int port) const;

  RedisClusterOptions options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_REDIS_CLUSTER_H_
