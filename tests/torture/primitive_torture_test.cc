// The primitives' short torture run (tools/test): issue 16's invariants in
// real worker processes on a real redis-server, under SIGSTOP of holders and
// waiters past their TTL, kill -9 of holders and waiters, and kill -9 +
// restart of the server (with AOF; without persistence under a restart
// window). Each
// scenario runs a few seconds and must show no violation (judged against
// lease validity, primitive_check.h):
//   - read-write lock: never a reader beside a writer, nor two writers;
//   - semaphore of 2: never more than 2 holders;
//   - fair lock: one holder, grants in queue order except past a waiter
//     paused beyond its queue entry's bound or across a server restart;
//   - multi-lock: one holder per resource, no strict subset left held after
//     a failure callback.
// It also checks each run was not vacuous: leases granted, and every fault
// kind of the scenario injected.
#include <cstdio>
#include <string>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dlock/tests/torture/primitive_driver.h"
#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

std::string WorkerPath() { return "tests/torture/primitive_worker"; }

// The scenario of `kind` with every fault (AOF server), or with restarts
// of a server without persistence under a 1 s restart window.
PrimitiveSpec Spec(const std::string& kind, bool all_faults) {
  for (PrimitiveSpec s : PrimitiveScenarios(absl::ZeroDuration())) {
    if (s.kind == kind && s.persistence == all_faults) {
      s.duration = all_faults ? absl::Seconds(6) : absl::Seconds(3);
      return s;
    }
  }
  ADD_FAILURE() << "no scenario " << kind;
  return PrimitiveSpec();
}

PrimitiveResult RunChecked(const PrimitiveSpec& spec) {
  absl::StatusOr<PrimitiveResult> r = RunPrimitiveScenario(spec, WorkerPath());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return PrimitiveResult();
  std::printf("%s", FormatPrimitiveTable({*r}).c_str());
  const PrimitiveReport& p = r->report;
  EXPECT_EQ(p.violations, 0) << absl::StrJoin(p.examples, "\n");
  EXPECT_EQ(p.fifo_violations, 0) << absl::StrJoin(p.examples, "\n");
  EXPECT_EQ(p.subset_left, 0) << absl::StrJoin(p.examples, "\n");
  EXPECT_GT(p.grants, 0) << "no lease granted";
  EXPECT_GT(r->restarts, 0) << "the server was never restarted";
  if (spec.persistence) {
    EXPECT_GT(r->holder_pauses, 0) << "no holder paused";
    EXPECT_GT(r->holder_kills, 0) << "no holder killed";
  }
  return *r;
}

TEST(PrimitiveTortureTest, ReadWriteLockNeverLetsAReaderBesideAWriterUnderFaults) {
  PrimitiveResult r = RunChecked(Spec("rw", true));
  EXPECT_GE(r.report.max_valid_holders, 2) << "readers never shared";
}

TEST(PrimitiveTortureTest, ReadWriteLockSurvivesRestartsUnderARestartWindow) {
  RunChecked(Spec("rw", false));
}

TEST(PrimitiveTortureTest, SemaphoreNeverHasMoreThanItsPermitsUnderFaults) {
  PrimitiveResult r = RunChecked(Spec("semaphore", true));
  EXPECT_LE(r.report.max_valid_holders, 2);
}

TEST(PrimitiveTortureTest, SemaphoreSurvivesRestartsUnderARestartWindow) {
  RunChecked(Spec("semaphore", false));
}

TEST(PrimitiveTortureTest, FairLockGrantsInQueueOrderWithinItsBoundUnderFaults) {
  PrimitiveResult r = RunChecked(Spec("fair", true));
  EXPECT_GT(r.report.queued_waits, 0) << "nobody queued: FIFO never at stake";
  EXPECT_GT(r.waiter_pauses, 0) << "no waiter paused";
}

TEST(PrimitiveTortureTest, FairLockSurvivesRestartsUnderARestartWindow) {
  RunChecked(Spec("fair", false));
}

TEST(PrimitiveTortureTest, MultiLockNeverHoldsAStrictSubsetAfterAFailureUnderFaults) {
  PrimitiveResult r = RunChecked(Spec("multi", true));
  EXPECT_GT(r.report.failures, 0) << "no acquire failed: the subset rule never at stake";
}

TEST(PrimitiveTortureTest, MultiLockSurvivesRestartsUnderARestartWindow) {
  RunChecked(Spec("multi", false));
}

TEST(PrimitiveTortureTest, ABadSpecIsRefusedWithAClearStatus) {
  PrimitiveSpec s = Spec("rw", true);
  s.kind = "mutex";
  EXPECT_EQ(RunPrimitiveScenario(s, WorkerPath()).status().code(),
            absl::StatusCode::kInvalidArgument);
  s = Spec("rw", true);
  s.readers = s.workers;
  EXPECT_EQ(RunPrimitiveScenario(s, WorkerPath()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
