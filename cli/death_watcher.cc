#include "dlock/cli/death_watcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dlock/cli/run_observer.h"

namespace dlock {
namespace cli {
namespace {

// The message meaning the group is gone.
constexpr int64_t kDone = -1;

int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t DeadlineNanos(absl::Time deadline) {
  // UvEventLoop::Now() is UnixEpoch() + uv_hrtime() (CLOCK_MONOTONIC).
  return absl::ToInt64Nanoseconds(deadline - absl::UnixEpoch());
}

[[noreturn]] void WatcherMain(int fd, pid_t pgid, int first_signal, int64_t kill_after_ns,
                              int64_t deadline_ns, int64_t margin_ns) {
  // Async-signal-safe calls only (forked from a process with threads).
  for (;;) {
    int64_t msg = 0;
    size_t got = 0;
    while (got < sizeof(msg)) {
      ssize_t n = read(fd, reinterpret_cast<char*>(&msg) + got, sizeof(msg) - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != sizeof(msg)) break;  // EOF: dlock is gone without kDone
    if (msg == kDone) _exit(0);
    deadline_ns = msg;
  }
  static const char kMessage[] =
      "dlock: dlock died while holding the lock; stopping the command's process group\n";
  ssize_t ignored = write(2, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  const int64_t now = MonotonicNanos();
  const int64_t kill_at = std::min(now + kill_after_ns, deadline_ns - margin_ns);
  kill(-pgid, first_signal);
  if (first_signal != SIGKILL) {
    while (MonotonicNanos() < kill_at) {
      if (kill(-pgid, 0) != 0) _exit(0);
      struct timespec pause = {0, 5 * 1000 * 1000};
      nanosleep(&pause, nullptr);
    }
    kill(-pgid, SIGKILL);
  }
  _exit(0);
}

}  // namespace

void DeathWatcher::Start(pid_t pgid, int first_signal, absl::Duration kill_after,
                         const Lease& lease) {
  if (first_signal == 0) return;  // --on-lost=ignore: let it run
  int w[2];
  if (pipe2(w, O_CLOEXEC) != 0) {
    PrintLine(absl::StrCat("pipe: ", std::strerror(errno),
                           "; running without a watcher (if dlock is killed only the "
                           "direct child is signalled)"));
    return;
  }
  const int64_t kill_after_ns = absl::ToInt64Nanoseconds(kill_after);
  const int64_t deadline_ns = DeadlineNanos(lease.deadline);
  const int64_t margin_ns = absl::ToInt64Nanoseconds(lease.ttl / 10);
  pid_t pid = fork();
  if (pid == 0) {
    // Survive what is meant for dlock (a terminal's ^C reaches the whole
    // foreground group) and SIGPIPE; keep stdio and the pipe only.
    for (int signum : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) {
      signal(signum, SIG_IGN);
    }
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    syscall(SYS_close_range, 3u, static_cast<unsigned>(w[0]) - 1, 0u);
    syscall(SYS_close_range, static_cast<unsigned>(w[0]) + 1, ~0u, 0u);
    WatcherMain(w[0], pgid, first_signal, kill_after_ns, deadline_ns, margin_ns);
  }
  close(w[0]);
  if (pid < 0) {
    close(w[1]);
    PrintLine(absl::StrCat("fork: ", std::strerror(errno),
                           "; running without a watcher (if dlock is killed only the "
                           "direct child is signalled)"));
    return;
  }
  pid_ = pid;
  fd_ = w[1];
}

void DeathWatcher::Renewed(absl::Time deadline) { Send(DeadlineNanos(deadline)); }

void DeathWatcher::Stop() {
  if (fd_ < 0) return;
  Send(kDone);
  close(fd_);
  fd_ = -1;
}

void DeathWatcher::Reap() {
  if (pid_ <= 0) return;
  int st;
  if (waitpid(pid_, &st, WNOHANG) == pid_) pid_ = -1;
}

void DeathWatcher::Send(int64_t msg) {
  if (fd_ < 0) return;
  ssize_t n;
  do {
    n = write(fd_, &msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
}

}  // namespace cli
}  // namespace dlock
