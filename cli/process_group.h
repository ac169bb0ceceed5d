// This header defines the process-group primitives of `dlock run`: starting
// CMD as the leader of a process group of its own (fork + setpgid + execvp
// rather than uv_spawn, so every signal dlock sends reaches a script's
// background jobs and subprocesses too), and telling whether any process of
// that group still runs.
//
// Residual windows: a process that leaves the group (setsid, setpgid, a
// daemon) is not signalled and not waited for; a process in
// uninterruptible sleep dies only when it wakes.
#ifndef DLOCK_CLI_PROCESS_GROUP_H_
#define DLOCK_CLI_PROCESS_GROUP_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"

namespace dlock {
namespace cli {

// What SpawnInGroup did.
struct Spawned {
  // > 0: CMD runs (its exec succeeded), leader of process group `pid`.
  pid_t pid = -1;
  // pid <= 0: the errno of the fork or the exec that failed, or 0 when dlock
  // could not prepare the spawn (a pipe).
  int error = 0;
};

// Runs `argv` (argv[0] looked up in PATH) with environment `env` as the
// leader of a new process group. The child gets `death_signal` (0: none)
// when dlock dies (PR_SET_PDEATHSIG), keeps stdio, drops dlock's other file
// descriptors and signal changes, and execs only after `in_group(pgid)`
// returned in dlock -- the group exists then, so a watcher can be set up
// before CMD does anything. If the exec fails, `exec_failed()` runs before
// the child is reaped. Failures are explained on stderr. Returns once the
// exec succeeded or failed.
Spawned SpawnInGroup(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int death_signal, absl::FunctionRef<void(pid_t)> in_group,
                     absl::FunctionRef<void()> exec_failed);

// True while a process of group `pgid` other than `except` and zombies
// runs. Reads /proc (a zombie still counts for kill(-pgid, 0)); without
// /proc the group counts as gone.
bool GroupAlive(pid_t pgid, pid_t except);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_PROCESS_GROUP_H_
