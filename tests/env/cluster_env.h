// This header defines the Cluster deployment kind for real-server tests:
// `SharedRedisCluster()` (one 3 + 3 RedisCluster per test process,
// //testing:redis_cluster, started on first use and never stopped: its
// nodes die with the process), `ClusterRedis` (that cluster reached through
// ClusterTransport, each instance starting from a cluster holding only the
// trusted per-slot data-set markers) and `ClusterEnv` (the behaviour suites'
// LockTestEnv over it).
#ifndef DLOCK_TESTS_ENV_CLUSTER_ENV_H_
#define DLOCK_TESTS_ENV_CLUSTER_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/tests/env/deployment_env.h"

namespace dlock {
namespace test_support {

// The per-slot data-set markers' key prefix (kept between tests).
inline constexpr char kClusterMarkerPrefix[] = "dlock:data-set-began:";

// nullptr (and a test failure, once) when the cluster did not start.
RedisCluster* SharedRedisCluster();

class ClusterRedis : public Deployment {
 public:
  // Deletes every key but the markers.
  ClusterRedis();
  // A ClusterTransport seeded with the first node.
  absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t* loop) override;
  // A keyed command goes to its slot's master, a keyless one (TIME: the
  // nodes share this machine's clock) to a master. DBSIZE counts the keys of
  // every master, with the 16384 per-slot markers counted as the one marker
  // a standalone server holds.
  absl::StatusOr<Reply> Command(std::vector<std::string> argv) override;
  // Classic subscriptions live on one node each: the sum over all nodes.
  int64_t Subscribers(const std::string& channel) override;

  // The cluster and its masters' node indexes, for per-node inspection.
  RedisCluster* cluster() const { return cluster_; }
  const std::vector<int>& masters() const { return masters_; }

 private:
  RedisCluster* const cluster_;
  std::vector<int> masters_;
};

using ClusterEnv = DeploymentEnv<ClusterRedis>;

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_CLUSTER_ENV_H_
