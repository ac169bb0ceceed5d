#include "dlock/cli/run_exit.h"

#include <errno.h>
#include <signal.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/cli/exit_codes.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

TEST(RunExitTest, RefusedSetupIsAUsageErrorUnlessItsCodeSaysMore) {
  EXPECT_EQ(ExitForRefusedSetup(absl::InvalidArgumentError("same server twice")), kExitUsage);
  EXPECT_EQ(ExitForRefusedSetup(absl::InternalError("odd")), kExitUsage);
  EXPECT_EQ(ExitForRefusedSetup(absl::PermissionDeniedError("NOPERM")), kExitNoPermission);
}

TEST(RunExitTest, AcquireFailures) {
  CommonOptions common;
  RunOptions run;
  run.resource = "inv";
  const absl::Status none;
  EXPECT_EQ(ExitForAcquireFailure(absl::AbortedError("held"), none, common, run), kExitBusy);
  EXPECT_EQ(ExitForAcquireFailure(absl::UnavailableError("down"), none, common, run),
            kExitUnavailable);
  EXPECT_EQ(ExitForAcquireFailure(absl::DeadlineExceededError("slow"), none, common, run),
            kExitUnavailable);
  EXPECT_EQ(ExitForAcquireFailure(absl::PermissionDeniedError("NOPERM"), none, common, run),
            kExitNoPermission);
  EXPECT_EQ(ExitForAcquireFailure(absl::InvalidArgumentError("ttl"), none, common, run),
            kExitUsage);
  EXPECT_EQ(ExitForAcquireFailure(absl::InternalError("reply"), none, common, run),
            kExitInternal);
  // --wait ran out while the lock was held: busy, not unavailable.
  run.wait = absl::Seconds(1);
  EXPECT_EQ(ExitForAcquireFailure(absl::DeadlineExceededError("wait over"),
                                  absl::AbortedError("held"), common, run),
            kExitBusy);
  EXPECT_EQ(ExitForAcquireFailure(absl::DeadlineExceededError("wait over"),
                                  absl::UnavailableError("down"), common, run),
            kExitUnavailable);
  run.permits = 3;
  EXPECT_EQ(ExitForAcquireFailure(absl::AbortedError("held"), none, common, run), kExitBusy);
}

TEST(RunExitTest, SpawnFailures) {
  EXPECT_EQ(ExitForSpawnFailure(ENOENT), kExitNotFound);
  EXPECT_EQ(ExitForSpawnFailure(EACCES), kExitCannotExecute);
  EXPECT_EQ(ExitForSpawnFailure(0), kExitInternal);
}

TEST(RunExitTest, CommandStatusAsShellsReportIt) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  info.si_code = CLD_EXITED;
  info.si_status = 3;
  EXPECT_EQ(ExitForCommand(info), 3);
  info.si_code = CLD_KILLED;
  info.si_status = SIGKILL;
  EXPECT_EQ(ExitForCommand(info), 128 + SIGKILL);
}

TEST(RunExitTest, DiesOfAnInterruptOnlyWhenTheRunEndedWithIt) {
  EXPECT_EQ(SignalToReraise(SIGINT, 128 + SIGINT), SIGINT);
  EXPECT_EQ(SignalToReraise(SIGQUIT, 128 + SIGQUIT), SIGQUIT);
  EXPECT_EQ(SignalToReraise(SIGINT, 0), 0);
  EXPECT_EQ(SignalToReraise(0, 128 + SIGINT), 0);
}

}  // namespace
}  // namespace cli
}  // namespace dlock
