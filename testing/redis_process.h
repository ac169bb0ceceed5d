// This header defines `RedisProcess`: starts a private `redis-server` on a
// free loopback port for dlock's examples, demo and tools, and stops it.
//
// It is the one process-management core: examples and tools are ordinary
// binaries, so it is not testonly (unlike the rest of //testing), and the
// testonly //testing:redis_server
// (`dlock::test_support::RedisServer`, which adds a synchronous hiredis client) is
// a thin wrapper over it. It talks to the server with a raw `PING` (after
// `AUTH` when `password` is set) on a socket only to know it is ready.
//
// The server runs in a fresh temporary directory (`--dir`, under
// $TEST_TMPDIR when set, else /tmp; removed by the destructor) or in
// `options.dir`, logs to `redis.log` there (its stdout/stderr go to
// `stdout.log`), persists nothing unless asked, and dies with the thread
// that started it (PR_SET_PDEATHSIG=SIGKILL), so a program that crashes
// leaves no server behind. The destructor stops it (SIGCONT first if
// paused).
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_REDIS_PROCESS_H_
#define DLOCK_TESTING_REDIS_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/testing/server_child.h"

namespace dlock {
namespace test_support {

struct RedisProcessOptions {
  // Extra `redis-server` arguments, one word each.
  std::vector<std::string> extra_args;
  // When non-empty, a config file passed as the first argument (a sentinel,
  // `--sentinel` in extra_args, needs one it can rewrite).
  std::string config_file;
  // appendonly yes + appendfsync always (survives Kill + Restart).
  bool appendonly = false;
  // When non-empty: `--requirepass password`; the readiness PING
  // authenticates first.
  std::string password;
  // Also listen on a unix socket (see `unix_socket()`).
  bool unix_socket = false;
  // When non-empty, an existing directory used as the server's `--dir`; it
  // is kept by the destructor. Default: a fresh temporary directory that the
  // destructor removes.
  std::string dir;
  absl::Duration start_timeout = absl::Seconds(10);
  // On the FIRST start only (not on Restart), for each prefix P: SET
  // P"data-set-began" 0 NX, which declares the never-used server's data set
  // trusted (dlock::TrustDataSetCommand), so RedLock counts its votes at
  // once and fences start at 1. Restart() never does this: a server
  // restarted without persistence is then young, as in production. Clear it
  // to test a brand-new, untrusted server.
  std::vector<std::string> trusted_data_set_prefixes = {"dlock:"};
};

// A free TCP port on 127.0.0.1 (bound, read, released; another process may
// take it before it is used: callers retry).
absl::StatusOr<int> PickFreeLoopbackPort();

// Pause/Resume/Kill, running/paused/pid: see ServerChild (Kill loses all
// data without appendonly).
class RedisProcess : public ServerChild {
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
  // The unix socket path, or "" when `options.unix_socket` is false.
  std::string unix_socket() const;
  // The server's working directory (holds redis.log and any data files).
  const std::string& dir() const { return dir_; }
  // SIGTERM, then SIGKILL after 10 s; reap. OK when already stopped.
  absl::Status Stop();
  // Stops it if running, then starts it again on the same port, directory
  // and arguments, and waits for PING.
  absl::Status Restart();

  // The last `max_bytes` of the server log, for failure messages.
  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  explicit RedisProcess(RedisProcessOptions options);
  absl::Status Spawn();
  absl::Status WaitReady();
  absl::Status TrustDataSet();

  RedisProcessOptions options_;
  int port_ = 0;
  std::string dir_;
  bool owns_dir_ = false;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_REDIS_PROCESS_H_
