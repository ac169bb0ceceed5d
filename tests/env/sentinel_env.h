// This header defines the Sentinel deployment kind for real-server tests:
// `SharedSentinelDeployment()` (one SentinelDeployment per test process: a
// master, 2 replicas, 3 sentinels; //testing:sentinel_deployment, started
// on first use and never stopped: its processes die with the process),
// `SentinelRedis` (that deployment reached through SentinelTransport, each
// instance starting from a master holding only the trusted data-set marker)
// and `SentinelEnv` (the behaviour suites' LockTestEnv over it).
#ifndef DLOCK_TESTS_ENV_SENTINEL_ENV_H_
#define DLOCK_TESTS_ENV_SENTINEL_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/tests/env/deployment_env.h"

namespace dlock {
namespace test_support {

// nullptr (and a test failure, once) when the deployment did not start.
SentinelDeployment* SharedSentinelDeployment();

class SentinelRedis : public Deployment {
 public:
  // Empties the master, then sets the trusted data-set marker (what a fresh
  // RedisServer holds; replicated to the replicas like any write).
  SentinelRedis();
  // A SentinelTransport over every sentinel of the deployment.
  absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t* loop) override;
  // Expects that the client confirmed the master the sentinels name.
  void CheckConnected(Transport& client) override;
  // On the master (subscriptions live there too: SentinelTransport
  // subscribes on the master).
  absl::StatusOr<Reply> Command(std::vector<std::string> argv) override;

 private:
  SentinelDeployment* const deployment_;
  RedisServer* master_ = nullptr;
};

using SentinelEnv = DeploymentEnv<SentinelRedis>;

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_SENTINEL_ENV_H_
