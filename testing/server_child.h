// This header defines `ServerChild`, the base of the private servers of
// //testing (RedisProcess, PgProcess): the process control they share -- one
// server child process, paused or not: waiting until it is ready, SIGSTOP /
// SIGCONT, SIGKILL, and a graceful stop with a deadline, each with the
// waitpid it needs. The subclass spawns the process and hands its pid to
// `Started`.
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_SERVER_CHILD_H_
#define DLOCK_TESTING_SERVER_CHILD_H_

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {
namespace test_support {

// The last `max_bytes` of the file at `path` ("" when unreadable): a
// server log's tail for failure messages.
std::string ReadTail(const std::string& path, size_t max_bytes);

// kInternal "<what>: <strerror(errno)>".
absl::Status ErrnoStatus(absl::string_view what);

class ServerChild {
 public:
  ServerChild(const ServerChild&) = delete;
  ServerChild& operator=(const ServerChild&) = delete;

  bool running() const { return pid_ > 0; }
  bool paused() const { return paused_; }
  // The server's pid, or -1 when it is not running.
  pid_t pid() const { return pid_; }

  // SIGSTOP / SIGCONT: the server keeps its sockets but answers nothing.
  // Pause returns once the process is stopped. kFailedPrecondition when
  // not running.
  absl::Status Pause();
  absl::Status Resume();
  // SIGKILL and reap. OK when not running.
  absl::Status Kill();

 protected:
  // Sends `sig` to the server (its process, and whatever else it must
  // reach); false when it could not be sent.
  using Signaller = std::function<bool(pid_t pid, int sig)>;

  // `name` names the server in messages ("redis-server", "postgres").
  ServerChild(std::string name, Signaller signal)
      : name_(std::move(name)), signal_(std::move(signal)) {}
  ~ServerChild() = default;

  // The server process just spawned (running, not paused).
  void Started(pid_t pid) {
    pid_ = pid;
    paused_ = false;
  }

  // Polls `ready` every `poll` until it holds: OK. kUnavailable when the
  // process exits first ("<name> exited during startup (status N). Log
  // tail:\n" + `exit_tail()`) or `timeout` passes ("<name> <not_ready>
  // within <timeout>. Log tail:\n" + `log_tail()`).
  absl::Status WaitReady(absl::FunctionRef<bool()> ready, absl::Duration timeout,
                         absl::Duration poll, const std::string& not_ready,
                         absl::FunctionRef<std::string()> log_tail,
                         absl::FunctionRef<std::string()> exit_tail);

  // SIGCONT when paused, then `stop_signal` to the process; SIGKILL after
  // `grace`. Reaped either way (polled every `poll`). OK when not running.
  absl::Status StopWith(int stop_signal, absl::Duration grace, absl::Duration poll);

 private:
  std::string name_;
  Signaller signal_;
  pid_t pid_ = -1;
  bool paused_ = false;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_SERVER_CHILD_H_
