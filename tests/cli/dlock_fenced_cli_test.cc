// Drives the real `dlock` binary's fenced-write subcommands (fence-check,
// fenced-set, fenced-incr; cli/fenced_commands.h) against private
// redis-servers, as a shell user would: with `dlock run`'s $DLOCK_FENCE, a
// store that is another Redis than the lock's, and every refusal's exit
// code (80 stale, 81 below the floor, 64 bad input, 69 store down, 70
// foreign data).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/cli/dlock_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::testing::HasSubstr;
using cli_test::kExitBelowFloor;
using cli_test::kExitInternal;
using cli_test::kExitStaleFence;
using cli_test::kExitUnavailable;
using cli_test::kExitUsage;
using cli_test::Outcome;
using cli_test::ReadFile;

// Runs dlock with `args` (and `env` added to an environment without
// $DLOCK_FENCE) to the end. Every command here is bounded by dlock's own
// --timeout.
Outcome RunDlock(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), {"--timeout", "5s"});
  return cli_test::RunDlock(std::move(args), {std::move(env), {"DLOCK_FENCE"}, {}});
}

class DlockFencedCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto lock = RedisServer::Start();
    ASSERT_THAT(lock.status(), IsOk());
    lock_ = *std::move(lock);
    auto store = RedisServer::Start();
    ASSERT_THAT(store.status(), IsOk());
    store_ = *std::move(store);
  }

  std::string LockUrl() const { return absl::StrCat("redis://", lock_->address()); }
  std::string StoreUrl() const { return absl::StrCat("redis://", store_->address()); }
  Reply Store(std::vector<std::string> argv) {
    auto r = store_->Command(std::move(argv));
    EXPECT_THAT(r.status(), IsOk());
    return r.ok() ? *r : Reply::Error("no reply");
  }

  std::unique_ptr<RedisServer> lock_;
  std::unique_ptr<RedisServer> store_;
};

TEST_F(DlockFencedCliTest, FenceCheckRecordsTheFenceAndRefusesALowerOneWith80) {
  Outcome o = RunDlock({"fence-check", "--store", StoreUrl(), "--fence", "5", "job"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(Store({"GET", "dlock:fenced:{job}"}), Reply::String("5"));
  o = RunDlock({"fence-check", "--store", StoreUrl(), "job"}, {"DLOCK_FENCE=5"});
  EXPECT_EQ(o.code, 0) << o.err;
  o = RunDlock({"fence-check", "--store", StoreUrl(), "job"}, {"DLOCK_FENCE=4"});
  EXPECT_EQ(o.code, kExitStaleFence);
  EXPECT_THAT(o.err, HasSubstr("stale fence 4 < highest 5"));
  // Per resource: another resource's fences are its own.
  o = RunDlock({"fence-check", "--store", StoreUrl(), "--fence", "1", "other-job"});
  EXPECT_EQ(o.code, 0) << o.err;
}

// The recipe of docs/fencing.md: the lock on one Redis, the data on
// another. A's lease ended (here: its run finished) and B took the lock
// with a higher fence and wrote; A's late write is refused, B's data stays.
TEST_F(DlockFencedCliTest, ALateHolderOfDlockRunIsRefusedByTheStore) {
  const std::string fence_file = absl::StrCat(std::getenv("TEST_TMPDIR"), "/a-fence");
  Outcome a = RunDlock({"--redis", LockUrl(), "run", "job", "--", "sh", "-c",
                   "echo $DLOCK_FENCE > " + fence_file});
  ASSERT_EQ(a.code, 0) << a.err;
  std::string a_fence(absl::StripAsciiWhitespace(ReadFile(fence_file)));
  int64_t parsed = 0;
  ASSERT_TRUE(absl::SimpleAtoi(a_fence, &parsed)) << a_fence;
  Outcome b = RunDlock({"--redis", LockUrl(), "run", "job", "--", cli_test::Dlock::Binary(), "fenced-set", "--store",
                   StoreUrl(), "job", "result:{job}", "from-B"});
  ASSERT_EQ(b.code, 0) << b.err;
  Outcome late = RunDlock({"fenced-set", "--store", StoreUrl(), "job", "result:{job}", "from-A"},
                     {"DLOCK_FENCE=" + a_fence});
  EXPECT_EQ(late.code, kExitStaleFence) << late.err;
  EXPECT_EQ(Store({"GET", "result:{job}"}), Reply::String("from-B"));
}

TEST_F(DlockFencedCliTest, FencedIncrPrintsTheValueAndStopsAtTheFloorWith81) {
  Store({"SET", "stock:{sku}", "1"});
  Outcome o = RunDlock({"fenced-incr", "--store", StoreUrl(), "--fence", "3", "--floor", "0", "sku",
                   "stock:{sku}", "-1"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "0\n");
  o = RunDlock({"fenced-incr", "--store", StoreUrl(), "--fence", "3", "--floor", "0", "sku",
           "stock:{sku}", "-1"});
  EXPECT_EQ(o.code, kExitBelowFloor) << o.err;
  EXPECT_THAT(o.err, HasSubstr("below the floor 0"));
  EXPECT_EQ(Store({"GET", "stock:{sku}"}), Reply::String("0"));
  // Without --store: the --redis server is the store.
  o = RunDlock({"--redis", StoreUrl(), "fenced-incr", "--fence", "3", "sku", "stock:{sku}", "5"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "5\n");
}

TEST_F(DlockFencedCliTest, BadInputIs64AndWritesNothing) {
  const std::string url = StoreUrl();
  EXPECT_EQ(RunDlock({"fence-check", "--store", url, "job"}).code, kExitUsage);  // no fence
  EXPECT_EQ(RunDlock({"fence-check", "--store", url, "--fence", "0", "job"}).code, kExitUsage);
  EXPECT_EQ(RunDlock({"fence-check", "--store", url, "job"}, {"DLOCK_FENCE=-2"}).code, kExitUsage);
  EXPECT_EQ(RunDlock({"fence-check", "--store", url, "job"}, {"DLOCK_FENCE=x"}).code, kExitUsage);
  Outcome slot = RunDlock({"fenced-set", "--store", url, "--fence", "1", "job", "result", "v"});
  EXPECT_EQ(slot.code, kExitUsage);
  EXPECT_THAT(slot.err, HasSubstr("{job}"));
  EXPECT_EQ(RunDlock({"fenced-incr", "--store", url, "--fence", "1", "job", "n:{job}", "x"}).code,
            kExitUsage);
  EXPECT_EQ(RunDlock({"fenced-set", "--store", url, "--fence", "1", "job", "k:{job}"}).code,
            kExitUsage);
  EXPECT_EQ(RunDlock({"fence-check", "--store", url, "--fence", "1", "--floor", "0", "job"}).code,
            kExitUsage);
  EXPECT_EQ(RunDlock({"fence-check", "--store", "http://x", "--fence", "1", "job"}).code,
            kExitUsage);
  EXPECT_EQ(Store({"EXISTS", "dlock:fenced:{job}", "result", "n:{job}", "k:{job}"}),
            Reply::Integer(0));
}

TEST_F(DlockFencedCliTest, ForeignDataIs70AndAStoreThatIsDownIs69) {
  Store({"HSET", "k:{job}", "f", "v"});
  Outcome o =
      RunDlock({"fenced-set", "--store", StoreUrl(), "--fence", "1", "job", "k:{job}", "v"});
  EXPECT_EQ(o.code, kExitInternal);
  EXPECT_THAT(o.err, HasSubstr("WRONGTYPE"));
  const std::string url = StoreUrl();
  ASSERT_THAT(store_->Stop(), IsOk());
  o = RunDlock({"fence-check", "--store", url, "--fence", "1", "job"});
  EXPECT_EQ(o.code, kExitUnavailable) << o.err;
}

}  // namespace
}  // namespace dlock
