// This header defines the TLS deployment kind for real-server tests:
// `TlsRedis` (a private redis-server with a throw-away CA,
// //transport/uv:tls_test_server, reached through TlsTransport, rediss://)
// and `TlsEnv` (the behaviour suites' LockTestEnv over it).
#ifndef DLOCK_TESTS_ENV_TLS_ENV_H_
#define DLOCK_TESTS_ENV_TLS_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/tests/env/deployment_env.h"
#include "dlock/transport/uv/tls_test_server.h"

namespace dlock {
namespace test_support {

// One private TLS redis-server per instance, started by the constructor (a
// start that fails is a test failure; every client then fails to connect).
class TlsRedis : public Deployment {
 public:
  TlsRedis();
  absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t* loop) override;
  absl::StatusOr<Reply> Command(std::vector<std::string> argv) override;
  // nullptr when the server did not start.
  TlsTestServer* server() { return server_.get(); }

 private:
  std::unique_ptr<TlsTestServer> server_;
};

using TlsEnv = DeploymentEnv<TlsRedis>;

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_TLS_ENV_H_
