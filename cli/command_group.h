// This header defines `CommandGroup`: `dlock run`'s command while it runs in
// a process group of its own, from the spawn until every process of the
// group has exited. It watches SIGCHLD (and polls /proc while the direct
// child has exited but others of its group run), hands the terminal to the
// group and back (TerminalHandover), keeps a DeathWatcher that stops the
// group if dlock dies, and signals the whole group.
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_CLI_COMMAND_GROUP_H_
#define DLOCK_CLI_COMMAND_GROUP_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dlock/cli/death_watcher.h"
#include "dlock/cli/signal_watch.h"
#include "dlock/cli/terminal.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/event_loop.h"

struct uv_loop_s;

namespace dlock {
namespace cli {

class CommandGroup {
 public:
  // `on_gone(status)` runs once every process of the group has exited
  // (status: the direct child's exit status as shells report it); the
  // group is then no longer `running()`. `kill_after`: --kill-after.
  CommandGroup(EventLoop* loop, uv_loop_s* uv_loop, absl::Duration kill_after,
               std::function<void(int)> on_gone);
  // Gives the terminal back if the group still has it; cancels its timers.
  ~CommandGroup();
  CommandGroup(const CommandGroup&) = delete;
  CommandGroup& operator=(const CommandGroup&) = delete;

  // Runs `argv` with `env` in a new process group. `on_lost_signal` (0:
  // none) is what the command gets if dlock dies while holding `lease`
  // (see DeathWatcher). Returns 0 once it runs, else the run's exit code
  // (why is on stderr): 127 not found, 126 not executable, 70 internal.
  int Start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            int on_lost_signal, const Lease& lease);

  // True from a successful Start until the group is gone.
  bool running() const { return running_; }
  pid_t pgid() const { return pgid_; }

  // Sends `signum` to the whole group, unless it is gone.
  void Signal(int signum);
  // SIGKILL to the group if it is still there after --kill-after (armed
  // once; at once when --kill-after is 0).
  void ArmKillTimer();
  // After a renewal: the lease's new deadline, for the DeathWatcher.
  void Renewed(absl::Time deadline) { watcher_.Renewed(deadline); }

 private:
  // On SIGCHLD, once after the spawn, and every kGroupPoll while the direct
  // child has exited but other members of its group still run.
  void Check();
  // Peeks at the direct child: stopped (job control) or exited.
  void CheckLeader();
  void OnGone();

  static constexpr absl::Duration kGroupPoll = absl::Milliseconds(20);

  EventLoop* const loop_;
  uv_loop_s* const uv_loop_;
  const absl::Duration kill_after_;
  std::function<void(int)> on_gone_;
  SignalWatch sigchld_;
  TerminalHandover terminal_;
  DeathWatcher watcher_;
  pid_t child_pid_ = -1;
  pid_t pgid_ = -1;
  bool running_ = false;
  bool child_exited_ = false;
  int child_status_ = 0;
  bool gone_ = false;
  TimerId kill_timer_ = 0;
  TimerId poll_timer_ = 0;
  TimerId first_check_ = 0;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_COMMAND_GROUP_H_
