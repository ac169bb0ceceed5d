// This header defines `SentinelDeployment`: a Redis master, its replicas and
// a set of sentinels watching it, each a private `redis-server` process on a
// free loopback port (sentinels run as `redis-server <conf> --sentinel`),
// for tests of Sentinel discovery and failover.
//
//   auto d = SentinelDeployment::Start({});   // 1 master, 2 replicas, 3 sentinels
//   std::string url = d->url();               // redis-sentinel://127.0.0.1:p1,.../mymaster
//   d->Failover();                            // SENTINEL FAILOVER, waits for the new master
//   d->data(d->MasterIndex().value()).Kill(); // kill -9 the master
//
// Failure detection is configured down (down-after-milliseconds, failover
// timeout) so a failover after a kill takes a few seconds, not a minute.
// Everything is stopped by the destructor. Tests only (testonly).
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_SENTINEL_DEPLOYMENT_H_
#define DLOCK_TESTING_SENTINEL_DEPLOYMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/testing/redis_server.h"

namespace dlock {
namespace test_support {

struct SentinelDeploymentOptions {
  int replicas = 2;
  int sentinels = 3;
  // Sentinels that must agree the master is down (`sentinel monitor ...
  // quorum`).
  int quorum = 2;
  std::string master_name = "mymaster";
  // sentinel down-after-milliseconds / failover-timeout.
  absl::Duration down_after = absl::Milliseconds(1000);
  absl::Duration failover_timeout = absl::Milliseconds(2000);
  // Extra arguments for every data node (master and replicas).
  std::vector<std::string> data_extra_args;
  // How long Start and the Wait* helpers wait.
  absl::Duration timeout = absl::Seconds(30);
};

class SentinelDeployment {
 public:
  // Starts the master, the replicas (`--replicaof` the master) and the
  // sentinels, and waits until the replicas are in sync and every sentinel
  // knows every replica and every other sentinel (SENTINEL CKQUORUM OK).
  // kNotFound without redis-server; kUnavailable / kDeadlineExceeded with
  // the logs' tails when the deployment does not come up.
  static absl::StatusOr<std::unique_ptr<SentinelDeployment>> Start(
      SentinelDeploymentOptions options = {});
  ~SentinelDeployment();

  // Data node i: 0 is the first master, 1.. the first replicas (roles change
  // with failovers; MasterIndex tells the current one).
  RedisServer& data(int i) { return *data_[i]; }
  int data_count() const { return static_cast<int>(data_.size()); }
  RedisServer& sentinel(int i) { return *sentinels_[i]; }
  int sentinel_count() const { return static_cast<int>(sentinels_.size()); }
  const std::string& master_name() const { return options_.master_name; }

  // "redis-sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,.../<master name>".
  std::string url() const;

  // The data node the first reachable sentinel names as master.
  absl::StatusOr<int> MasterIndex();
  // `SENTINEL FAILOVER <name>` on a sentinel, then WaitForNewMaster.
  absl::Status Failover();
  // Waits until every running sentinel names a master other than data node
  // `old_index`, and that node answers ROLE "master". Returns its index.
  absl::StatusOr<int> WaitForNewMaster(int old_index);
  // Waits until the master reports `n` connected replicas in sync
  // (INFO replication: state=online).
  absl::Status WaitForReplicas(int n);

 private:
  explicit SentinelDeployment(SentinelDeploymentOptions options)
      : options_(std::move(options)) {}
  absl::Status StartSentinels();
  absl::Status WaitForSentinelsReady();
  int IndexOfPort(int port) const;

  SentinelDeploymentOptions options_;
  std::string conf_dir_;
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_SENTINEL_DEPLOYMENT_H_
