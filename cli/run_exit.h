// This header defines how `dlock run` turns what happened into its exit
// code (the codes are in exit_codes.h) and says why on stderr:
//
//   what happened                         | exit
//   --------------------------------------+---------------------------------
//   the lock refused its configuration    | 64 (any other status's code, 70
//   or the acquire's options              | becoming 64: a usage error)
//   busy (after --wait)                   | 75
//   Redis unavailable (or young data sets)| 69, with `dlock trust` advice
//   permission denied                     | 77
//   other acquire failure                 | 70
//   the command could not be started     | 127 not found, 126 else (70: dlock
//                                         | could not prepare the spawn)
//   the command ran                       | its status; 128+N if killed by N
//   the lease was lost while it ran       | 79 (once the group is gone)
//   dlock got SIGINT/SIGQUIT, run ended   | dlock dies of that signal
//   with 128+that signal                  |
#ifndef DLOCK_CLI_RUN_EXIT_H_
#define DLOCK_CLI_RUN_EXIT_H_

#include <signal.h>

#include "absl/status/status.h"
#include "dlock/cli/commands.h"

namespace dlock {
namespace cli {

// The exit code for a lock that refused its configuration or the acquire's
// options before anything was sent; prints `status`.
int ExitForRefusedSetup(const absl::Status& status);

// The exit code for a failed acquire (`status`), after saying why on
// stderr. `last_wait_error`: the error of the latest attempt while waiting
// (it tells contention from an outage once --wait ran out, and may carry
// the young-data-set refusal).
int ExitForAcquireFailure(const absl::Status& status, const absl::Status& last_wait_error,
                          const CommonOptions& common, const RunOptions& run);

// The exit code when the command could not be started: `error` is the
// errno of its fork or exec (ENOENT: 127, else 126), 0 when dlock could not
// prepare the spawn (70).
int ExitForSpawnFailure(int error);

// The command's exit status as a shell reports it: its exit code, or
// 128+N when signal N killed it. `info` is what waitid returned for it.
int ExitForCommand(const siginfo_t& info);

// The signal dlock should die of after cleaning up, or 0: when dlock got a
// SIGINT/SIGQUIT (`interrupted_by`, a ^C to a script's process group) and
// the run ended with 128+that signal, dying of it (rather than exiting
// 130) tells a calling shell script the user interrupted, so it stops too
// -- the convention shells expect of any command.
int SignalToReraise(int interrupted_by, int exit_code);

// Dies of `signum` (its default action, no core dump for SIGQUIT: a ^\ is
// no crash of dlock's). Returns only if the signal does not kill.
void DieOfSignal(int signum);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_RUN_EXIT_H_
