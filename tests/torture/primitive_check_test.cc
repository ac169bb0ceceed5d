// The primitives' checker on hand-made logs: each invariant it judges goes
// red on a violation and stays green on the overlaps lease validity and the
// fair lock's documented bound excuse.
#include "dlock/tests/torture/primitive_check.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

constexpr int64_t kMs = 1000000;

// A granted attempt holding [grant, end), valid until `valid`.
Attempt Hold(int worker, int64_t seq, int64_t grant, int64_t end, int64_t valid,
             bool reader = false, std::vector<int> resources = {0}) {
  Attempt a;
  a.worker = worker;
  a.seq = seq;
  a.reader = reader;
  a.resources = std::move(resources);
  a.ask_ns = grant - kMs;
  a.grant_ns = grant;
  a.deadline_ns = valid;
  a.end_ns = end;
  a.valid_until_ns = valid;
  return a;
}

CheckParams Params(const std::string& kind) {
  CheckParams p;
  p.kind = kind;
  p.permits = 2;
  p.queue_ttl_ns = 900 * kMs;
  p.ttl_ns = 400 * kMs;
  return p;
}

TEST(PrimitiveCheckTest, AReaderBesideAWriterIsAViolationWhileBothLeasesAreValid) {
  std::vector<Attempt> a = {Hold(0, 1, 0, 100 * kMs, 400 * kMs, /*reader=*/true),
                            Hold(1, 1, 50 * kMs, 150 * kMs, 450 * kMs)};
  PrimitiveReport r = CheckPrimitive(a, {}, Params("rw"));
  EXPECT_EQ(r.violations, 1);
  EXPECT_FALSE(r.examples.empty());
}

TEST(PrimitiveCheckTest, AnOverlapPastTheFirstHoldersDeadlineIsExcused) {
  // The reader was paused: its hold ran to 2 s, its lease only to 400 ms.
  std::vector<Attempt> a = {Hold(0, 1, 0, 2000 * kMs, 400 * kMs, /*reader=*/true),
                            Hold(1, 1, 500 * kMs, 600 * kMs, 900 * kMs)};
  PrimitiveReport r = CheckPrimitive(a, {}, Params("rw"));
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.raw_conflicts, 1);
}

TEST(PrimitiveCheckTest, ReadersShareAndWritersDoNot) {
  std::vector<Attempt> readers = {Hold(0, 1, 0, 100 * kMs, 400 * kMs, true),
                                  Hold(1, 1, 50 * kMs, 150 * kMs, 450 * kMs, true)};
  EXPECT_EQ(CheckPrimitive(readers, {}, Params("rw")).violations, 0);
  EXPECT_EQ(CheckPrimitive(readers, {}, Params("rw")).max_valid_holders, 2);
  std::vector<Attempt> writers = {Hold(0, 1, 0, 100 * kMs, 400 * kMs),
                                  Hold(1, 1, 50 * kMs, 150 * kMs, 450 * kMs)};
  EXPECT_EQ(CheckPrimitive(writers, {}, Params("rw")).violations, 1);
}

TEST(PrimitiveCheckTest, AThirdPermitHolderIsAViolationAndBackToBackHoldsAreNot) {
  std::vector<Attempt> a = {Hold(0, 1, 0, 100 * kMs, 400 * kMs),
                            Hold(1, 1, 10 * kMs, 100 * kMs, 400 * kMs),
                            Hold(2, 1, 100 * kMs, 200 * kMs, 500 * kMs)};
  PrimitiveReport ok = CheckPrimitive(a, {}, Params("semaphore"));
  EXPECT_EQ(ok.violations, 0);
  EXPECT_EQ(ok.max_valid_holders, 2);
  a.push_back(Hold(3, 1, 20 * kMs, 30 * kMs, 400 * kMs));
  PrimitiveReport bad = CheckPrimitive(a, {}, Params("semaphore"));
  EXPECT_EQ(bad.violations, 1);
  EXPECT_EQ(bad.max_valid_holders, 3);
}

TEST(PrimitiveCheckTest, MultiLockResourcesAreExclusiveOnlyWhereTheSetsMeet) {
  std::vector<Attempt> a = {Hold(0, 1, 0, 100 * kMs, 400 * kMs, false, {0, 1}),
                            Hold(1, 1, 50 * kMs, 150 * kMs, 450 * kMs, false, {2, 3})};
  EXPECT_EQ(CheckPrimitive(a, {}, Params("multi")).violations, 0);
  a.push_back(Hold(2, 1, 60 * kMs, 70 * kMs, 450 * kMs, false, {1, 2}));
  EXPECT_EQ(CheckPrimitive(a, {}, Params("multi")).violations, 2);
}

TEST(PrimitiveCheckTest, ASubLeaseLeftAfterAFailureIsAViolationAnUnknownReleaseIsNot) {
  Attempt f;
  f.worker = 0;
  f.seq = 1;
  f.ask_ns = 0;
  f.end_ns = 10 * kMs;
  f.failed = true;
  f.unknown = 1;
  PrimitiveReport r = CheckPrimitive({f}, {}, Params("multi"));
  EXPECT_EQ(r.subset_left, 0);
  EXPECT_EQ(r.subset_unknown, 1);
  f.left = 1;
  EXPECT_EQ(CheckPrimitive({f}, {}, Params("multi")).subset_left, 1);
}

// Worker 0 queued at 10 ms and was granted at 900 ms; worker 1 asked at
// 20 ms and was granted at 500 ms: it passed over worker 0.
std::vector<Attempt> Overtaken() {
  Attempt a = Hold(0, 1, 900 * kMs, 1000 * kMs, 1300 * kMs);
  a.ask_ns = 0;
  a.queued_ns = 10 * kMs;
  Attempt b = Hold(1, 1, 500 * kMs, 600 * kMs, 900 * kMs);
  b.ask_ns = 20 * kMs;
  return {a, b};
}

TEST(PrimitiveCheckTest, AGrantPassingOverALiveEarlierWaiterIsAFifoViolation) {
  PrimitiveReport r = CheckPrimitive(Overtaken(), {}, Params("fair"));
  EXPECT_EQ(r.overtakes, 1);
  EXPECT_EQ(r.fifo_violations, 1);
  // A waiter that asked after the other was granted is no overtake.
  std::vector<Attempt> a = Overtaken();
  a[1].ask_ns = 950 * kMs;
  a[1].grant_ns = 1000 * kMs;
  a[1].end_ns = 1100 * kMs;
  EXPECT_EQ(CheckPrimitive(a, {}, Params("fair")).overtakes, 0);
}

TEST(PrimitiveCheckTest, PassingOverAWaiterPausedBeyondTheBoundIsExcused) {
  FaultWindow pause;
  pause.kind = FaultWindow::kPause;
  pause.worker = 0;
  pause.start_ns = 50 * kMs;  // + min(900, 400) / 2 = 250 ms <= the 500 ms grant
  pause.end_ns = 800 * kMs;
  PrimitiveReport r = CheckPrimitive(Overtaken(), {pause}, Params("fair"));
  EXPECT_EQ(r.fifo_violations, 0);
  EXPECT_EQ(r.overtakes_excused, 1);
}

TEST(PrimitiveCheckTest, PassingOverAPausedWaiterSoonerThanItsEntryCanExpireIsAViolation) {
  FaultWindow pause;
  pause.kind = FaultWindow::kPause;
  pause.worker = 0;
  pause.start_ns = 400 * kMs;  // + 200 ms > the 500 ms grant
  pause.end_ns = 1500 * kMs;
  EXPECT_EQ(CheckPrimitive(Overtaken(), {pause}, Params("fair")).fifo_violations, 1);
  // Another worker's pause excuses nothing.
  pause.start_ns = 50 * kMs;
  pause.worker = 2;
  EXPECT_EQ(CheckPrimitive(Overtaken(), {pause}, Params("fair")).fifo_violations, 1);
}

TEST(PrimitiveCheckTest, ServerRestartExcusesAnOvertakeNearIt) {
  FaultWindow restart;
  restart.kind = FaultWindow::kServerRestart;
  restart.start_ns = 100 * kMs;
  restart.end_ns = 200 * kMs;
  EXPECT_EQ(CheckPrimitive(Overtaken(), {restart}, Params("fair")).fifo_violations, 0);
  restart.start_ns = 600 * kMs;  // after the grant
  restart.end_ns = 700 * kMs;
  EXPECT_EQ(CheckPrimitive(Overtaken(), {restart}, Params("fair")).fifo_violations, 1);
}

TEST(PrimitiveCheckTest, ParsesALogAndClosesAKilledWorkersOpenHold) {
  const std::string log =
      "ask 1 100\nqueued 1 150\ngrant 1 200 900 7\nend 1 300 950 0\n"
      "ask 2 400\nfail 2 500 4 1 0\n"
      "ask 3 600\ngrant 3 700 1200 8\n"
      "end 3 8";  // cut short by the kill
  absl::StatusOr<std::vector<Attempt>> a = ParseAttempts(log, 3, 1, false, {0}, 1000);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].queued_ns, 150);
  EXPECT_EQ((*a)[0].valid_until_ns, 950);
  EXPECT_EQ((*a)[0].fence, 7);
  EXPECT_TRUE((*a)[1].failed);
  EXPECT_EQ((*a)[1].left, 1);
  EXPECT_EQ((*a)[2].end_ns, 1000);
  EXPECT_EQ((*a)[2].valid_until_ns, 1200);
}

TEST(PrimitiveCheckTest, ABadLogIsAClearError) {
  for (const char* log : {"grant 1 2 3 4\n", "ask x 1\n", "ask 1 1\nask 1 2\n", "hello\n",
                          "ask 1 1\nend 1 2 3 0\n"}) {
    EXPECT_EQ(ParseAttempts(log, 0, 0, false, {0}, 10).status().code(),
              absl::StatusCode::kInvalidArgument)
        << log;
  }
  // An attempt left open by a worker that exited by itself.
  EXPECT_EQ(ParseAttempts("ask 1 1\n", 0, 0, false, {0}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
