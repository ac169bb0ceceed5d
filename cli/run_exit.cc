#include "dlock/cli/run_exit.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/run_observer.h"
#include "dlock/lock/reply_status.h"

namespace dlock {
namespace cli {
namespace {

// "all N permits are held" / "lock is busy", with how long it waited and,
// for RedLock, the servers that refused for a young data set (restarted,
// flushed or new: the restart rule), which are worth naming.
void PrintBusy(const absl::Status& st, const RunOptions& run) {
  const std::string r = absl::CEscape(run.resource);
  const bool waited = run.wait > absl::ZeroDuration();
  if (run.permits > 0) {
    std::fprintf(stderr, "dlock: all %lld permits of \"%s\" are held%s\n",
                 static_cast<long long>(run.permits), r.c_str(),
                 waited ? absl::StrCat(" (still after waiting ",
                                       absl::FormatDuration(run.wait), ")").c_str()
                        : "");
    return;
  }
  const std::string young =
      absl::StrContains(st.message(), "young") ? absl::StrCat("; ", st.message())
                                               : std::string();
  std::fprintf(stderr, "dlock: lock \"%s\" is busy%s%s\n", r.c_str(),
               waited ? absl::StrCat(" (still held after waiting ",
                                     absl::FormatDuration(run.wait), ")").c_str()
                      : " (held by another owner)",
               young.c_str());
}

}  // namespace

int ExitForRefusedSetup(const absl::Status& status) {
  PrintLine(status.ToString());
  const int code = ExitCodeForStatus(status);
  return code == kExitInternal ? kExitUsage : code;
}

int ExitForAcquireFailure(const absl::Status& st, const absl::Status& last_wait_error,
                          const CommonOptions& common, const RunOptions& run) {
  const bool contention =
      absl::IsAborted(st) || (absl::IsDeadlineExceeded(st) && run.wait > absl::ZeroDuration() &&
                              absl::IsAborted(last_wait_error));
  if (contention) {
    PrintBusy(st, run);
    return kExitBusy;
  }
  if (absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) {
    std::fprintf(stderr, "dlock: Redis unavailable: %s\n", st.ToString().c_str());
    // Refused for young data sets (the restart rule): say how long is left
    // and what the way out is, with when it is safe.
    for (const absl::Status& why : {st, last_wait_error}) {
      std::optional<absl::Duration> left = YoungTimeLeftQuoted(why.message());
      if (!left.has_value()) continue;
      std::fprintf(stderr, "%s\n", YoungDataSetAdvice(*left, common.urls).c_str());
      break;
    }
    return kExitUnavailable;
  }
  // kInvalidArgument -> 64 (a configuration the lock refuses),
  // kPermissionDenied -> 77 (ACL NOPERM, NOAUTH), else 70.
  std::fprintf(stderr, "dlock: cannot take lock \"%s\": %s%s\n",
               absl::CEscape(run.resource).c_str(),
               absl::IsPermissionDenied(st) ? "permission denied: " : "", st.ToString().c_str());
  return ExitCodeForStatus(st);
}

int ExitForSpawnFailure(int error) {
  if (error == 0) return kExitInternal;
  return error == ENOENT ? kExitNotFound : kExitCannotExecute;
}

int ExitForCommand(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

int SignalToReraise(int interrupted_by, int exit_code) {
  return interrupted_by != 0 && exit_code == 128 + interrupted_by ? interrupted_by : 0;
}

void DieOfSignal(int signum) {
  std::fflush(nullptr);
  if (signum == SIGQUIT) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
  }
  signal(signum, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signum);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(signum);
}

}  // namespace cli
}  // namespace dlock
