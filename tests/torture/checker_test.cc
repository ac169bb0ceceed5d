// Tests the torture checker on hand-made records: it is what decides
// whether a torture run found a safety violation, so it must itself be
// checked against known answers.
#include <vector>

#include "dlock/tests/torture/torture_client.h"
#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

CsRecord Rec(int worker, int64_t start, int64_t end, CsOutcome o = CsOutcome::kWritten) {
  CsRecord r;
  r.worker = worker;
  r.start_ns = start;
  r.end_ns = end;
  r.outcome = o;
  return r;
}

TEST(CheckerTest, DisjointIntervalsHaveNoOverlap) {
  EXPECT_EQ(CountOverlaps({Rec(0, 0, 10), Rec(1, 10, 20), Rec(0, 20, 30)}), 0);
}

TEST(CheckerTest, CountsEachOverlappingPairOfDifferentWorkers) {
  // 1 overlaps 0 and 2; 0 and 2 are disjoint.
  EXPECT_EQ(CountOverlaps({Rec(0, 0, 10), Rec(1, 5, 25), Rec(2, 20, 30)}), 2);
}

TEST(CheckerTest, OneWorkerNeverOverlapsItself) {
  EXPECT_EQ(CountOverlaps({Rec(0, 0, 10), Rec(0, 5, 15)}), 0);
}

TEST(CheckerTest, IntervalContainingManyOthersCountsEveryPair) {
  EXPECT_EQ(CountOverlaps({Rec(0, 0, 100), Rec(1, 10, 20), Rec(2, 30, 40), Rec(1, 50, 60)}), 3);
}

TEST(CheckerTest, ReadWriteOverlapsCountOnlyPairsWithAWriter) {
  // Workers 0 and 1 read, 2 and 3 write. Readers 0/1 overlap (allowed);
  // reader 1 overlaps writer 2; writers 2 and 3 overlap; 3 and 0 do not.
  auto is_reader = [](int w) { return w < 2; };
  ReadWriteOverlaps o = CountReadWriteOverlaps(
      {Rec(0, 0, 10), Rec(1, 5, 25), Rec(2, 20, 30), Rec(3, 28, 40), Rec(0, 40, 50)}, is_reader);
  EXPECT_EQ(o.reader_writer, 1);
  EXPECT_EQ(o.writer_writer, 1);
}

TEST(CheckerTest, MaxConcurrentIsTheMostIntervalsOpenAtOnce) {
  EXPECT_EQ(MaxConcurrent({}), 0);
  // Half-open: one ending at 10 and one starting at 10 are never both open.
  EXPECT_EQ(MaxConcurrent({Rec(0, 0, 10), Rec(1, 10, 20)}), 1);
  EXPECT_EQ(MaxConcurrent({Rec(0, 0, 30), Rec(1, 5, 15), Rec(2, 10, 20), Rec(3, 16, 40)}), 3);
}

TEST(CheckerTest, LostUpdatesComeFromTheStoreCounters) {
  Counters c;
  c.reg = 9;
  c.acc = 10;
  c.unf = 7;
  c.unf_n = 12;
  Report r = CheckRecords({Rec(0, 0, 1), Rec(1, 2, 3, CsOutcome::kWriteRejected),
                           Rec(1, 4, 5, CsOutcome::kReadRejected),
                           Rec(0, 6, 7, CsOutcome::kExpiredLocally)},
                          c);
  EXPECT_EQ(r.cs_attempted, 4);
  EXPECT_EQ(r.cs_completed, 1);
  EXPECT_EQ(r.stale_rejected, 2);
  EXPECT_EQ(r.expired_locally, 1);
  EXPECT_EQ(r.lost_fenced, 1);
  EXPECT_EQ(r.lost_unfenced, 5);
  EXPECT_EQ(r.acc_vs_records, 9);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
