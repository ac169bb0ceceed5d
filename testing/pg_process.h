// This header defines `PgProcess`: starts a private PostgreSQL server
// (`initdb` + `postgres`) on a free loopback port for dlock's examples,
// tests and torture runs, and stops it. Not testonly (examples and the
// torture driver are ordinary binaries); the testonly //testing:pg_server
// (`dlock::test_support::PgServer`) wraps it with a query helper for tests.
//
// Where and as whom:
//   - binaries: /usr/lib/postgresql/<newest>/bin (Debian's `postgresql`),
//     else `initdb`/`postgres` on PATH. kNotFound when neither exists.
//   - directory: a fresh temporary directory (under $TEST_TMPDIR when set,
//     else /tmp; removed by the destructor) holding `data/` (the cluster)
//     and `postgres.log`. The unix socket lives there too, or in a short
//     directory under /tmp when that path would exceed sun_path's 107 bytes
//     (Bazel's TEST_TMPDIR is long).
//   - user: `initdb` and `postgres` refuse to run as root. When dlock runs
//     as root, each child enters a user namespace of its own in which the
//     caller's uid is mapped to 65534 ("nobody"): PostgreSQL sees a
//     non-root owner of its files, nothing is chowned, and this works both
//     on a plain machine and inside Bazel's linux-sandbox (whose own user
//     namespace maps only uid 0, so a real setuid to another user is
//     impossible there). As a non-root user the servers just run as that
//     user.
//   - network: listens on 127.0.0.1 only; trust authentication, superuser
//     `postgres`, database `postgres`.
//   - no orphans: the postmaster dies with the thread that started it
//     (PR_SET_PDEATHSIG=SIGKILL); its backends exit when they see the
//     postmaster gone. The destructor stops it. (Each backend runs in a
//     session of its own, so Pause/Kill signal the postmaster's children
//     one by one, found in /proc.)
//
// Made for speed, not durability: fsync=off. Data survives Kill() (the
// processes die, the kernel keeps what they wrote), not a machine crash.
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_PG_PROCESS_H_
#define DLOCK_TESTING_PG_PROCESS_H_

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

struct PgProcessOptions {
  // Extra server settings, each "name=value" (passed as `-c name=value`).
  std::vector<std::string> settings;
  // How long Start/Restart wait for the server to accept connections.
  absl::Duration start_timeout = absl::Seconds(60);
};

// Pause/Resume/Kill, running/paused/pid (the postmaster's): see
// ServerChild. Here the signals reach the whole server (postmaster and
// backends); Kill is a crash (open transactions are lost, committed ones
// survive).
class PgProcess : public ServerChild {
 public:
  // kNotFound when PostgreSQL's binaries are missing (install `postgresql`,
  // tools/setup); kUnavailable when initdb fails or the server does not
  // accept connections in time (log tail included).
  static absl::StatusOr<std::unique_ptr<PgProcess>> Start(PgProcessOptions options = {});
  ~PgProcess();

  PgProcess(const PgProcess&) = delete;
  PgProcess& operator=(const PgProcess&) = delete;

  int port() const { return port_; }
  // A libpq connection string for `dbname` over TCP on 127.0.0.1, user
  // postgres, connect_timeout=5.
  std::string conninfo(const std::string& dbname = "postgres") const;
  // The directory holding the unix socket (`host=` of a socket conninfo).
  const std::string& socket_dir() const { return socket_dir_; }
  const std::string& dir() const { return dir_; }
  // Fast shutdown (SIGINT: open transactions are rolled back), SIGKILL
  // after 20 s. OK when already stopped.
  absl::Status Stop();
  // Stops it if running (fast shutdown), then starts it again on the same
  // port and data directory and waits until it accepts connections.
  absl::Status Restart();

  // The last `max_bytes` of the server log, for failure messages.
  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  explicit PgProcess(PgProcessOptions options);
  absl::Status InitDb();
  absl::Status Spawn();
  absl::Status WaitReady();
  // Runs argv as a child (in the user namespace when root), output to
  // `log_path`, and waits for it when `wait`; returns its pid.
  absl::StatusOr<pid_t> RunChild(std::vector<std::string> args, const std::string& log_path,
                                 bool own_process_group);

  PgProcessOptions options_;
  std::string bin_dir_;
  std::string dir_;
  std::string socket_dir_;
  bool owns_socket_dir_ = false;
  int port_ = 0;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_PG_PROCESS_H_
