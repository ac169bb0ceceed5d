// The fenced torture run, short, on each protected store (PostgreSQL and a
// second Redis): worker processes read-modify-write a counter under a dlock
// lock while a nemesis SIGSTOPs them past
// the TTL between read and write and kill -9s them. With fenced writes no
// update is lost and stale writes are refused; without, updates are lost
// (the same nemesis, so this shows the fence is what protects the counter).
#include <cstdlib>
#include <iostream>
#include <string>

#include "dlock/tests/torture/fenced_torture.h"
#include "dlock/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

std::string WorkerPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir ? srcdir : ".") + "/" + (ws ? ws : "dlock") +
         "/tests/torture/fenced_worker";
}

class FencedTortureTest : public ::testing::TestWithParam<FencedStoreKind> {
 protected:
  FencedTortureOptions Options(bool fencing) const {
    FencedTortureOptions o;
    o.worker_path = WorkerPath();
    o.store = GetParam();
    o.workers = 4;
    // Redis answers faster: as many pauses in less time. Each run still has
    // several pauses past the TTL (asserted below).
    o.duration = GetParam() == FencedStoreKind::kRedis ? absl::Seconds(4) : absl::Seconds(6);
    o.fencing = fencing;
    return o;
  }
};

TEST_P(FencedTortureTest, WithFencingNoUpdateIsLostAndStaleWritesAreRefused) {
  FencedTortureOptions o = Options(true);
  absl::StatusOr<FencedTortureResult> r = RunFencedTorture(o);
  ASSERT_THAT(r, test_support::IsOk());
  std::cout << FencedTortureRow(o, *r) << "\n";
  EXPECT_GT(r->pauses, 0);
  EXPECT_GT(r->increments, 0);
  EXPECT_EQ(r->lost_updates, 0);
  EXPECT_GT(r->stale_refused, 0);
}

TEST_P(FencedTortureTest, WithoutFencingTheSameRunLosesUpdates) {
  FencedTortureOptions o = Options(false);
  absl::StatusOr<FencedTortureResult> r = RunFencedTorture(o);
  ASSERT_THAT(r, test_support::IsOk());
  std::cout << FencedTortureRow(o, *r) << "\n";
  EXPECT_GT(r->pauses, 0);
  EXPECT_GT(r->lost_updates, 0);
  EXPECT_EQ(r->stale_refused, 0);
}

INSTANTIATE_TEST_SUITE_P(Stores, FencedTortureTest,
                         ::testing::Values(FencedStoreKind::kPostgres, FencedStoreKind::kRedis),
                         [](const ::testing::TestParamInfo<FencedStoreKind>& info) {
                           return std::string(FencedStoreName(info.param));
                         });

}  // namespace
}  // namespace torture
}  // namespace dlock
