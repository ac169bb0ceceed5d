// This header defines `DeploymentEnv<D>`: the behaviour suites' LockTestEnv
// (lock/lock_behavior_suite.h) over real servers, for any deployment kind
// `D` (standalone_env.h, tls_env.h, sentinel_env.h, cluster_env.h). The
// client side -- the uv loop, connecting each new client before a test
// uses it, closing them all and checking the loop closes clean -- is
// written once here (UvClients); a deployment supplies only what differs:
//
//   class D : public Deployment {   // default-constructible; starts or
//    public:                        // resets its servers in the constructor
//     absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t*) override;
//     absl::StatusOr<Reply> Command(std::vector<std::string> argv) override;
//   };
//   using Envs = ::testing::Types<DeploymentEnv<D>>;
//
// Not thread-safe: one test at a time, on the thread running its loop.
#ifndef DLOCK_TESTS_ENV_DEPLOYMENT_ENV_H_
#define DLOCK_TESTS_ENV_DEPLOYMENT_ENV_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace test_support {

// The servers of one deployment, as a test environment sees them.
class Deployment {
 public:
  virtual ~Deployment() = default;
  // A new client of this deployment on `loop`, not connected yet.
  virtual absl::StatusOr<std::unique_ptr<Transport>> NewTransport(uv_loop_t* loop) = 0;
  // Checks on a client that has just connected (none by default).
  virtual void CheckConnected(Transport& client) {}
  // A synchronous command (setup and inspection, not under test), on the
  // server that holds the keys it names.
  virtual absl::StatusOr<Reply> Command(std::vector<std::string> argv) = 0;
  // Server-side subscribers of `channel`: PUBSUB NUMSUB through Command.
  virtual int64_t Subscribers(const std::string& channel) {
    absl::StatusOr<Reply> r = Command({"PUBSUB", "NUMSUB", channel});
    return r.ok() && r->is_array() && r->elements.size() == 2 ? r->elements[1].integer : -1;
  }
};

template <typename D>
class DeploymentEnv : public LockTestEnv {
 public:
  ~DeploymentEnv() override { clients_.Close(); }

  D& deployment() { return deployment_; }
  UvClients& clients() { return clients_; }

  EventLoop* loop() override { return clients_.loop(); }

  Transport* NewClient() override {
    Transport* t = clients_.Connect(deployment_.NewTransport(clients_.uv_loop()));
    if (t != nullptr) deployment_.CheckConnected(*t);
    return t;
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return clients_.RunUntil(done, limit);
  }
  void RunFor(absl::Duration d) override { clients_.RunFor(d); }

  Reply Server(std::vector<std::string> argv) override {
    absl::StatusOr<Reply> r = deployment_.Command(std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  int64_t Subscribers(const std::string& channel) override {
    return deployment_.Subscribers(channel);
  }

  // Generous: sanitizer builds on a loaded 2-core machine running the whole
  // suite in parallel. Still far below the 20 s backoff timers the wake-up
  // tests rule out.
  absl::Duration round_trip() const override { return absl::Milliseconds(250); }

 private:
  // Declared first: the servers outlive the clients, which close first.
  D deployment_;
  UvClients clients_;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_DEPLOYMENT_ENV_H_
