// This header defines `ExampleEnv`, the scaffolding every dlock example
// shares: the Redis servers (started privately on free loopback ports, or
// the ones named by --redis), a libuv loop with dlock's UvEventLoop on it,
// and fresh connections (one HiredisTransport per simulated process).
//
// Not thread-safe: use it on the thread that created it.
#ifndef DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_
#define DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/examples/support/redis_process.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/uv/hiredis_transport.h"

struct uv_loop_s;

namespace dlock {
namespace examples {

class ExampleEnv {
 public:
  // `urls`: servers to use (redis://host:port); when empty, starts
  // `servers` private redis-server processes.
  static absl::StatusOr<std::unique_ptr<ExampleEnv>> Create(
      const std::vector<std::string>& urls, int servers);
  // Stops the servers it started and closes the loop (after every
  // transport made by Connect was destroyed).
  ~ExampleEnv();

  uv_loop_s* uv_loop() const { return uv_loop_; }
  EventLoop* loop() const { return loop_.get(); }
  size_t servers() const { return endpoints_.size(); }
  // "127.0.0.1:port" of server i.
  std::string address(size_t i) const;
  // The process of server i, or null when it was given by --redis.
  RedisProcess* process(size_t i) const;

  // A new connection to server i (a separate client, as another process
  // would have).
  std::unique_ptr<HiredisTransport> Connect(size_t i);

  // Runs the loop until `done()` or `timeout`; false on timeout.
  bool RunUntil(absl::FunctionRef<bool()> done,
                absl::Duration timeout = absl::Seconds(30));

 private:
  ExampleEnv() = default;

  std::vector<std::unique_ptr<RedisProcess>> processes_;
  std::vector<std::pair<std::string, int>> endpoints_;
  uv_loop_s* uv_loop_ = nullptr;
  std::unique_ptr<EventLoop> loop_;
};

// Prints "[example] ..." lines to stdout (flushed at once).
void Say(const std::string& line);

}  // namespace examples
}  // namespace dlock

#endif  // DLOCK_EXAMPLES_SUPPORT_EXAMPLE_ENV_H_
