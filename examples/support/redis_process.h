// This header defines `RedisProcess`: starts a private `redis-server` on a
// free loopback port for dlock's examples, demo and tools, and stops it.
//
// It is the non-test sibling of //tests/testing:redis_server (which is
// testonly and also has a synchronous client): examples are ordinary
// binaries, so they cannot depend on test helpers. It talks to the server
// with a raw `PING` on a socket only to know it is ready; everything else
// goes through dlock's own transport.
//
// The server runs in a fresh temporary directory (`--dir`), logs to
// `redis.log` there, persists nothing unless asked, and dies with the thread
// that started it (PR_SET_PDEATHSIG), so an example that crashes leaves no
// server behind. The destructor stops it (SIGCONT first if paused).
//
// This class is thread-compatible.
#ifndef DLOCK_EXAMPLES_SUPPORT_REDIS_PROCESS_H_
#define DLOCK_EXAMPLES_SUPPORT_REDIS_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock {
namespace examples {

struct RedisProcessOptions {
  // Extra `redis-server` arguments, one word each.
  std::vector<std::string> extra_args;
  // appendonly yes + appendfsync always (survives Kill + Restart).
  bool appendonly = false;
  absl::Duration start_timeout = absl::Seconds(10);
};

class RedisProcess {
 public:
  // kNotFound when redis-server is not on PATH (install redis-server);
  // kUnavailable when it does not answer PING in time (log tail included).
  static absl::StatusOr<std::unique_ptr<RedisProcess>> Start(
      RedisProcessOptions options = {});
  ~RedisProcess();

  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  int port() const { return port_; }
  // "redis://127.0.0.1:<port>".
  std::string url() const;
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // SIGSTOP / SIGCONT: the server keeps its socket but answers nothing.
  absl::Status Pause();
  absl::Status Resume();
  // SIGKILL and reap (all data lost without appendonly).
  absl::Status Kill();
  // SIGTERM, then SIGKILL after 10 s; reap.
  absl::Status Stop();
  // Starts it again on the same port and directory.
  absl::Status Restart();

  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  explicit RedisProcess(RedisProcessOptions options);
  absl::Status Spawn();
  absl::Status WaitReady();

  RedisProcessOptions options_;
  int port_ = 0;
  std::string dir_;
  pid_t pid_ = -1;
  bool paused_ = false;
};

}  // namespace examples
}  // namespace dlock

#endif  // DLOCK_EXAMPLES_SUPPORT_REDIS_PROCESS_H_
