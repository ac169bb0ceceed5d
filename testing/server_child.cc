#include "dlock/testing/server_child.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dlock {
namespace test_support {

std::string ReadTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  if (all.size() > max_bytes) all = all.substr(all.size() - max_bytes);
  return all;
}

absl::Status ErrnoStatus(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}


absl::Status ServerChild::WaitReady(absl::FunctionRef<bool()> ready, absl::Duration timeout,
                                    absl::Duration poll, const std::string& not_ready,
                                    absl::FunctionRef<std::string()> log_tail,
                                    absl::FunctionRef<std::string()> exit_tail) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat(name_, " exited during startup (status ",
                                                 wstatus, "). Log tail:\n", exit_tail()));
    }
    if (ready()) return absl::OkStatus();
    // Polling an external process for readiness, bounded by `deadline`.
    absl::SleepFor(poll);
  }
  return absl::UnavailableError(absl::StrCat(name_, " ", not_ready, " within ",
                                             absl::FormatDuration(timeout),
                                             ". Log tail:\n", log_tail()));
}

absl::Status ServerChild::Pause() {
  if (!running()) return absl::FailedPreconditionError(absl::StrCat(name_, " not running"));
  if (!signal_(pid_, SIGSTOP)) {
    return ErrnoStatus("kill(SIGSTOP)");
  }
  // Wait until the stop has taken effect, so the caller's next step really
  // meets a stopped server.
  int wstatus = 0;
  if (waitpid(pid_, &wstatus, WUNTRACED) != pid_ || !WIFSTOPPED(wstatus)) {
    return absl::InternalError(absl::StrCat(name_, " did not stop"));
  }
  paused_ = true;
  return absl::OkStatus();
}

absl::Status ServerChild::Resume() {
  if (!running()) return absl::FailedPreconditionError(absl::StrCat(name_, " not running"));
  if (!signal_(pid_, SIGCONT)) {
    return ErrnoStatus("kill(SIGCONT)");
  }
  paused_ = false;
  return absl::OkStatus();
}

absl::Status ServerChild::Kill() {
  if (!running()) return absl::OkStatus();
  signal_(pid_, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  paused_ = false;
  return absl::OkStatus();
}

absl::Status ServerChild::StopWith(int stop_signal, absl::Duration grace, absl::Duration poll) {
  if (!running()) return absl::OkStatus();
  if (paused_) signal_(pid_, SIGCONT);
  kill(pid_, stop_signal);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      paused_ = false;
      return absl::OkStatus();
    }
    absl::SleepFor(poll);
  }
  return Kill();
}

}  // namespace test_support
}  // namespace dlock
