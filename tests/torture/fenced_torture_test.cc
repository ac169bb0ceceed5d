// The fenced torture run, short: worker processes read-modify-write a
// PostgreSQL counter under a dlock lock while a nemesis SIGSTOPs them past
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

FencedTortureOptions Options(bool fencing) {
  FencedTortureOptions o;
  o.worker_path = WorkerPath();
  o.workers = 4;
  o.duration = absl::Seconds(8);
  o.fencing = fencing;
  return o;
}

TEST(FencedTortureTest, WithFencingNoUpdateIsLostAndStaleWritesAreRefused) {
  FencedTortureOptions o = Options(true);
  absl::StatusOr<FencedTortureResult> r = RunFencedTorture(o);
  ASSERT_THAT(r, test_support::IsOk());
  std::cout << FencedTortureRow(o, *r) << "\n";
  EXPECT_GT(r->pauses, 0);
  EXPECT_GT(r->increments, 0);
  EXPECT_EQ(r->lost_updates, 0);
  EXPECT_GT(r->stale_refused, 0);
}

TEST(FencedTortureTest, WithoutFencingTheSameRunLosesUpdates) {
  FencedTortureOptions o = Options(false);
  absl::StatusOr<FencedTortureResult> r = RunFencedTorture(o);
  ASSERT_THAT(r, test_support::IsOk());
  std::cout << FencedTortureRow(o, *r) << "\n";
  EXPECT_GT(r->pauses, 0);
  EXPECT_GT(r->lost_updates, 0);
  EXPECT_EQ(r->stale_refused, 0);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
