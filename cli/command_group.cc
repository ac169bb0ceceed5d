#include "dlock/cli/command_group.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <utility>

#include "dlock/cli/exit_codes.h"
#include "dlock/cli/process_group.h"
#include "dlock/cli/run_exit.h"
#include "dlock/cli/run_observer.h"

namespace dlock {
namespace cli {

CommandGroup::CommandGroup(EventLoop* loop, uv_loop_s* uv_loop, absl::Duration kill_after,
                           std::function<void(int)> on_gone)
    : loop_(loop), uv_loop_(uv_loop), kill_after_(kill_after), on_gone_(std::move(on_gone)) {}

CommandGroup::~CommandGroup() {
  terminal_.TakeBack();
  for (TimerId t : {kill_timer_, poll_timer_, first_check_}) {
    if (t != 0) loop_->Cancel(t);
  }
}

int CommandGroup::Start(const std::vector<std::string>& argv,
                        const std::vector<std::string>& env, int on_lost_signal,
                        const Lease& lease) {
  // Watch SIGCHLD before the child exists, so its exit cannot be missed.
  sigchld_.Start(uv_loop_, {SIGCHLD}, [this](int) { Check(); });
  terminal_.NoteJob();
  Spawned spawned = SpawnInGroup(
      argv, env, on_lost_signal,
      [&](pid_t pgid) {
        terminal_.HandTo(pgid);
        child_pid_ = pgid;
        pgid_ = pgid;
        watcher_.Start(pgid, on_lost_signal, kill_after_, lease);
      },
      [this] { watcher_.Stop(); });
  if (spawned.pid <= 0) {
    sigchld_.Stop();
    return ExitForSpawnFailure(spawned.error);
  }
  running_ = true;
  // A child that exited before running_ was set sent its SIGCHLD too early
  // to be noticed: check once on the next turn.
  first_check_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
    first_check_ = 0;
    Check();
  });
  return 0;
}

void CommandGroup::Signal(int signum) {
  if (pgid_ > 0 && !gone_) kill(-pgid_, signum);
}

void CommandGroup::ArmKillTimer() {
  if (kill_timer_ != 0 || kill_after_ == absl::ZeroDuration()) {
    if (kill_timer_ == 0) Signal(SIGKILL);
    return;
  }
  kill_timer_ = loop_->RunAfter(kill_after_, [this] {
    kill_timer_ = 0;
    if (running_) {
      PrintLine("command's process group still running; sending SIGKILL");
      Signal(SIGKILL);
    }
  });
}

void CommandGroup::Check() {
  if (!running_) return;
  watcher_.Reap();
  CheckLeader();
  if (!child_exited_) return;  // still running
  if (GroupAlive(pgid_, child_pid_)) {
    if (poll_timer_ == 0) {
      poll_timer_ = loop_->RunAfter(kGroupPoll, [this] {
        poll_timer_ = 0;
        Check();
      });
    }
    return;
  }
  OnGone();
}

void CommandGroup::CheckLeader() {
  if (child_exited_) return;
  siginfo_t stop;
  std::memset(&stop, 0, sizeof(stop));
  if (waitid(P_PID, static_cast<id_t>(child_pid_), &stop, WSTOPPED | WNOHANG) == 0 &&
      stop.si_pid == child_pid_) {
    // Job control; the lease is not renewed while dlock is stopped with it:
    // a stop longer than its validity loses the lock, exit 79.
    if (terminal_.OnCommandStopped(stop.si_status, pgid_)) Signal(SIGCONT);
  }
  // Peek without reaping: while the direct child is an unreaped zombie its
  // pid -- the group id -- cannot be reused.
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(child_pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r != 0 || info.si_pid != child_pid_) return;  // still running
  child_exited_ = true;
  child_status_ = ExitForCommand(info);
  // What is left of the group runs in the background, as after a shell
  // job's leader exits: dlock is in the foreground again, so a ^C reaches
  // dlock (forwarded; SIGKILL after --kill-after).
  terminal_.TakeBack();
}

// Every process of the group has exited.
void CommandGroup::OnGone() {
  if (poll_timer_ != 0) {
    loop_->Cancel(poll_timer_);
    poll_timer_ = 0;
  }
  gone_ = true;
  terminal_.TakeBack();
  watcher_.Stop();
  int st;
  waitpid(child_pid_, &st, 0);  // now the group id may be reused
  sigchld_.Stop();
  running_ = false;
  if (kill_timer_ != 0) {
    loop_->Cancel(kill_timer_);
    kill_timer_ = 0;
  }
  on_gone_(child_status_);
}

}  // namespace cli
}  // namespace dlock
