// This header defines the exit codes of the `dlock` command-line tool.
//
//   code | meaning
//   -----+-------------------------------------------------------------------
//   0..  | `dlock run`: the command's own exit status (128+N if it was killed
//        | by signal N, as shells report it). Other subcommands: 0 = success.
//   64   | bad usage: unknown flag or subcommand, bad URL, bad duration, ...
//   69   | Redis unavailable: could not reach enough servers, or an error
//        | reply, before the lock was taken.
//   70   | internal error (a bug, an unexpected reply, foreign data under
//        | the lock key).
//   75   | lock busy: held by another owner (after waiting --wait).
//   77   | permission denied: the server refused a command (ACL NOPERM,
//        | NOAUTH / wrong password).
//   78   | `dlock check`: the deployment has an unsafe setting (reasons on
//        | stderr).
//   79   | lock lost while the command ran: renewal was refused or did not
//        | succeed before the lease's deadline; the command was signalled per
//        | --on-lost, and dlock exits 79 once it has ended.
//   80   | fenced write (fence-check, fenced-set, fenced-incr): stale fence,
//        | a newer holder has written to the store; nothing was written.
//   81   | fenced-incr: the result would be below --floor; nothing written.
//   126  | the command could not be executed (permission, not executable).
//   127  | the command was not found.
//
// 64, 69, 70, 75, 77 and 78 are the <sysexits.h> codes EX_USAGE,
// EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL, EX_NOPERM and EX_CONFIG; 126 and
// 127 are the shell's.
//
// A library status maps to an exit code with ExitCodeForStatus:
//   kInvalidArgument (bad configuration, e.g. the same Redis instance given
//   twice to RedLock)              -> 64
//   kPermissionDenied              -> 77
//   kAborted (busy)                -> 75
//   kUnavailable, kDeadlineExceeded-> 69
//   anything else                  -> 70
#ifndef DLOCK_CLI_EXIT_CODES_H_
#define DLOCK_CLI_EXIT_CODES_H_

#include "absl/status/status.h"

namespace dlock {
namespace cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitUnavailable = 69;
inline constexpr int kExitInternal = 70;
inline constexpr int kExitBusy = 75;
inline constexpr int kExitNoPermission = 77;
inline constexpr int kExitUnsafe = 78;
inline constexpr int kExitLost = 79;
inline constexpr int kExitStaleFence = 80;
inline constexpr int kExitBelowFloor = 81;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

// The exit code for a non-OK status from the library (see the table above).
inline int ExitCodeForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kPermissionDenied:
      return kExitNoPermission;
    case absl::StatusCode::kAborted:
      return kExitBusy;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitInternal;
  }
}

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_EXIT_CODES_H_
