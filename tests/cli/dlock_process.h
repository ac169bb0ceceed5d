// This header defines what the CLI tests share to drive the real `dlock`
// binary (//cli:dlock, a `data` dependency of each test) as a user would:
// `Dlock`, one running (or finished) dlock process with its output in
// files; `RunDlock`, a whole run to its end; the exit codes the tests
// expect (cli/exit_codes.h, as numbers: what a shell script sees); and
// bounded waits on files an external process writes.
//
// Waits on an external process poll (10 ms) up to their bound: nothing here
// sleeps to paper over a race. Not thread-safe: one test thread.
#ifndef DLOCK_TESTS_CLI_DLOCK_PROCESS_H_
#define DLOCK_TESTS_CLI_DLOCK_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dlock {
namespace cli_test {

inline constexpr int kExitUsage = 64;
inline constexpr int kExitUnavailable = 69;
inline constexpr int kExitInternal = 70;
inline constexpr int kExitBusy = 75;
inline constexpr int kExitUnsafe = 78;
inline constexpr int kExitLost = 79;
inline constexpr int kExitStaleFence = 80;
inline constexpr int kExitBelowFloor = 81;
inline constexpr int kExitNotFound = 127;

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);
// Waits (bounded) until `path` exists.
bool WaitForFile(const std::string& path, absl::Duration timeout = absl::Seconds(10));
// Waits (bounded) until `path` contains `text`.
bool WaitForText(const std::string& path, const std::string& text,
                 absl::Duration timeout = absl::Seconds(10));
// "$TEST_TMPDIR/<current test's name>-<name>": a file of this test's own.
std::string TestPath(const std::string& name);

struct DlockOptions {
  // "NAME=value" entries added to the inherited environment.
  std::vector<std::string> extra_env;
  // Inherited variables ("NAME") dlock does not get.
  std::vector<std::string> unset_env;
  // Standard descriptors (0, 1, 2) dlock starts with closed instead of
  // /dev/null (stdin) or the output files.
  std::vector<int> closed;
};

// A running (or finished) dlock process; stdin is /dev/null, stdout and
// stderr go to files of their own. The destructor kills (SIGKILL) and
// reaps a dlock that is still running.
class Dlock {
 public:
  explicit Dlock(std::vector<std::string> args, DlockOptions options = {});
  // The older spelling: extra environment and closed descriptors.
  Dlock(std::vector<std::string> args, std::vector<std::string> extra_env,
        std::vector<int> closed = {});
  Dlock(const Dlock&) = delete;
  Dlock& operator=(const Dlock&) = delete;
  ~Dlock();

  // $TEST_SRCDIR/dlock/cli/dlock.
  static std::string Binary();

  // Waits (bounded) for the exit; returns the exit code, 128+N for signal
  // N, or -1 on timeout (or when dlock could not be started).
  int Wait(absl::Duration timeout = absl::Seconds(20));

  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }
  pid_t pid() const { return pid_; }
  // After Wait(): dlock died of a signal (rather than exiting 128+N).
  bool signaled() const { return signaled_; }
  // Non-zero: posix_spawn's error.
  int spawn_error() const { return spawn_error_; }

 private:
  pid_t pid_ = -1;
  int spawn_error_ = 0;
  bool exited_ = false;
  bool signaled_ = false;
  int code_ = -1;
  std::string out_path_, err_path_;
};

// A whole dlock run: its exit code (128+N for signal N; -1 when it did not
// exit within `limit` and was killed, or could not start) and its output.
struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome RunDlock(std::vector<std::string> args, DlockOptions options = {},
                 absl::Duration limit = absl::Seconds(30));

}  // namespace cli_test
}  // namespace dlock

#endif  // DLOCK_TESTS_CLI_DLOCK_PROCESS_H_
