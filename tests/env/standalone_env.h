// This header defines the standalone deployment kind for real-server tests:
// `StandaloneRedis` (one private redis-server, //testing:redis_server,
// reached through HiredisTransport), `StandaloneEnv` (the behaviour suites'
// LockTestEnv over it). The RedLock deployment kind (n independent servers)
// is in redis_servers.h.
#ifndef DLOCK_TESTS_ENV_STANDALONE_ENV_H_
#define DLOCK_TESTS_ENV_STANDALONE_ENV_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/testing/redis_server.h"
#include "dlock/tests/env/deployment_env.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace test_support {

// One private redis-server per instance, started by the constructor (a
// start that fails is a test failure; every client then fails to connect).
class StandaloneRedis : public Deployment {
 public:
  StandaloneRedis();
  absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t* loop) override;
  absl::StatusOr<Reply> Command(std::vector<std::string> argv) override;
  // nullptr when the server did not start.
  RedisServer* server() { return server_.get(); }

 private:
  std::unique_ptr<RedisServer> server_;
};

using StandaloneEnv = DeploymentEnv<StandaloneRedis>;

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_STANDALONE_ENV_H_
