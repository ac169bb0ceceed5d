// This header defines `ExampleEnv`, the scaffolding every dlock example
// shares: an EventLoop, N Redis servers, fresh connections to them (one
// Transport per simulated process), and a way to kill a server.
//
// Two implementations:
//   - real (always linked): private redis-server processes on free loopback
//     ports (or the servers named by --redis), a libuv loop with dlock's
//     UvEventLoop, and HiredisTransport connections;
//   - fake (//examples/support:fake_env, testonly): FakeRedis servers and
//     FakeTransport connections on a ManualEventLoop in virtual time. It is
//     only in the `<example>_fake` binaries, which are testonly like every
//     dlock fake, so a production binary can never link the fake by
//     accident. It registers itself when linked (see RegisterFakeEnv).
//
// Not thread-safe: use it on the thread that created it.
#ifndef DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_
#define DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace examples {

class ExampleEnv {
 public:
  // `fake`: in-memory servers in virtual time (only in *_fake binaries;
  // kFailedPrecondition elsewhere). Otherwise `urls` (redis://host:port)
  // name the servers to use; when empty, `servers` private redis-server
  // processes are started.
  static absl::StatusOr<std::unique_ptr<ExampleEnv>> Create(
      const std::vector<std::string>& urls, int servers, bool fake);
  // Stops whatever it started. Destroy every connection first.
  virtual ~ExampleEnv() = default;

  virtual EventLoop* loop() = 0;
  virtual size_t servers() const = 0;
  // "127.0.0.1:port" (real) or "fake-N" (fake) of server i.
  virtual std::string address(size_t i) const = 0;
  // A new connection to server i (a separate client, as another process
  // would have); null (after printing why) if it cannot be made.
  virtual std::unique_ptr<Transport> Connect(size_t i) = 0;
  // Runs the loop until `done()` or `timeout` (loop time); false on timeout.
  virtual bool RunUntil(absl::FunctionRef<bool()> done,
                        absl::Duration timeout = absl::Seconds(30)) = 0;
  // Kills server i (connections then fail). kFailedPrecondition for a
  // server given by --redis (the example does not own it).
  virtual absl::Status KillServer(size_t i) = 0;
};

// Used by fake_env.cc to make itself available to Create(fake = true).
using FakeEnvFactory =
    std::function<std::unique_ptr<ExampleEnv>(int servers)>;
bool RegisterFakeEnv(FakeEnvFactory factory);

// Prints a line to stdout (flushed at once).
void Say(const std::string& line);

}  // namespace examples
}  // namespace dlock

#endif  // DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_
