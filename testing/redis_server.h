// This header defines `RedisServer`, a test helper that runs a private
// `redis-server` process on a free loopback port and controls it: pause
// (SIGSTOP), resume, kill, restart on the same port, stop.
//
// The server binary is `redis-server` from PATH. Its working directory is a
// fresh subdirectory of $TEST_TMPDIR (or of a mkdtemp directory under /tmp
// when not run by Bazel); its log goes to `redis.log` there. By default it
// persists nothing (`--save '' --appendonly no`).
//
// No orphans: the destructor always stops the server (resuming it first if
// paused), and the child is started with PR_SET_PDEATHSIG=SIGKILL, so even a
// test that crashes or aborts takes its servers with it. (The death signal
// follows the *thread* that called Start: start servers from a thread that
// outlives them, e.g. the test's main thread.)
//
// The process management is //testing:redis_process (`RedisProcess`, not
// testonly); this class wraps it and adds
// `Command`, which runs one command on a synchronous hiredis connection of the
// helper's own, for test setup and inspection; it is not the code under test.
//
// Example:
//   ASSERT_OK_AND_ASSIGN(auto server, RedisServer::Start({}));
//   transport_options.port = server->port();
//   server->Pause();  ...  server->Resume();
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_REDIS_SERVER_H_
#define DLOCK_TESTING_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/testing/redis_process.h"
#include "dlock/transport/reply.h"

struct redisContext;

namespace dlock {
namespace test_support {

struct RedisServerOptions {
  // Appended to the command line, one word per element, e.g. an ACL user:
  // {"--user", "alice", "on", ">pw", "~*", "&*", "+@all"}.
  std::vector<std::string> extra_args;
  // See RedisProcessOptions::config_file.
  std::string config_file;

  // When non-empty, the server runs with `--requirepass password` and the
  // helper's own connection (`Command`) authenticates with it.
  std::string password;

  // Persist with an append-only file (`--appendonly yes --appendfsync
  // always`), so data survives `Kill()` + `Restart()`. Default: no
  // persistence at all.
  bool appendonly = false;

  // Also listen on a unix socket (`<dir>/redis.sock`, see `unix_socket()`).
  bool unix_socket = false;

  // Declared trusted on the first start (see RedisProcessOptions::
  // trusted_data_set_prefixes): RedLock counts the server's votes at once and
  // fences start at 1. Restart() leaves a restarted server's data set young.
  // Clear it to test a brand-new, untrusted server.
  std::vector<std::string> trusted_data_set_prefixes = {"dlock:"};

  // How long `Start`/`Restart` wait for the server to answer PING.
  absl::Duration start_timeout = absl::Seconds(10);

  // I/O timeout of the helper's own connection (`Command`), so a paused
  // server makes `Command` fail instead of hang.
  absl::Duration command_timeout = absl::Seconds(5);
};

class RedisServer {
 public:
  // Starts a server and waits until it answers PING. Returns kUnavailable
  // (with the tail of the server log in the message) when it cannot start
  // or does not answer within `options.start_timeout`; kNotFound when
  // `redis-server` is not on PATH.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(
      RedisServerOptions options = {});

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Stops the server (resuming it first if paused).
  ~RedisServer();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // "host:port".
  std::string address() const;
  // The unix socket path, or "" when `options.unix_socket` is false.
  std::string unix_socket() const;
  // The server's working directory (holds redis.log and any data files).
  const std::string& dir() const { return process_->dir(); }
  // The pid of the running server, or -1 when it is not running.
  pid_t pid() const { return process_->pid(); }
  bool running() const { return process_->running(); }
  bool paused() const { return process_->paused(); }

  // SIGSTOP: the server keeps its sockets but answers nothing until
  // Resume(). FailedPrecondition when not running.
  absl::Status Pause();
  // SIGCONT. FailedPrecondition when not running.
  absl::Status Resume();
  // SIGKILL and reap: connections see a reset / EOF. Without appendonly all
  // data is lost. OK when already stopped.
  absl::Status Kill();
  // Graceful stop (SIGTERM, SIGKILL after 10 s) and reap. OK when already
  // stopped.
  absl::Status Stop();
  // Stops the server if running, then starts it again with the same port,
  // directory and arguments, and waits for PING.
  absl::Status Restart();

  // Runs `argv` on the helper's synchronous connection (binary-safe) and
  // returns the reply (an error reply is a Reply of type kError).
  // kUnavailable when the server cannot be reached or does not answer within
  // `options.command_timeout` (e.g. while paused).
  absl::StatusOr<Reply> Command(std::vector<std::string> argv);

  // The last `max_bytes` of the server log, for failure messages.
  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  RedisServer(RedisServerOptions options,
              std::unique_ptr<RedisProcess> process);

  void DropConnection();

  RedisServerOptions options_;
  std::unique_ptr<RedisProcess> process_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  redisContext* conn_ = nullptr;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_REDIS_SERVER_H_
