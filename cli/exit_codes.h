// This header defines the exit codes of the `dlock` command-line tool.
//
//   code | meaning
//   -----+-------------------------------------------------------------------
//   0..  | `dlock run`: the command's own exit status (128+N if it was killed
//        | by signal N, as shells report it). Other subcommands: 0 = success.
//   64   | bad usage: unknown flag or subcommand, bad URL, bad duration, ...;
//        | `dlock run`: the server refused the user (NOAUTH, NOPERM, ...).
//   69   | Redis unavailable: could not reach enough servers, or an error
//        | reply, before the lock was taken.
//   70   | internal error (a bug or an unexpected reply).
//   75   | lock busy: held by another owner (after waiting --wait).
//   78   | `dlock check`: the deployment has an unsafe setting (reasons on
//        | stderr).
//   79   | lock lost while the command ran: renewal was refused or did not
//        | succeed before the lease's deadline; the command was signalled per
//        | --on-lost, and dlock exits 79 once it has ended.
//   126  | the command could not be executed (permission, not executable).
//   127  | the command was not found.
//
// 64, 69, 70, 75 and 78 are the <sysexits.h> codes EX_USAGE, EX_UNAVAILABLE,
// EX_SOFTWARE, EX_TEMPFAIL and EX_CONFIG; 126 and 127 are the shell's.
#ifndef DLOCK_CLI_EXIT_CODES_H_
#define DLOCK_CLI_EXIT_CODES_H_

namespace dlock {
namespace cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitUnavailable = 69;
inline constexpr int kExitInternal = 70;
inline constexpr int kExitBusy = 75;
inline constexpr int kExitUnsafe = 78;
inline constexpr int kExitLost = 79;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_EXIT_CODES_H_
