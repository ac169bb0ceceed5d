// ReentrantLock on FakeRedis in virtual time: unknown outcomes undo exactly
// the acquisition that may have run (never an outer hold), cancellation,
// owner identity, exact deadlines.
#include "dlock/lock/reentrant_lock.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/scripts.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class ReentrantLockTest : public ::testing::Test {
 protected:
  ReentrantLockTest() : server_(&loop_), conn_(&loop_, &server_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    server_.Execute(TrustDataSetCommand(KeyScheme{}));
    options_.client_id = "client";
    options_.command_timeout = absl::Milliseconds(200);
  }

  static AcquireOptions Task(std::string task, absl::Duration ttl = absl::Seconds(10)) {
    AcquireOptions o;
    o.ttl = ttl;
    o.task_id = std::move(task);
    return o;
  }

  std::shared_ptr<absl::StatusOr<Lease>> Start(ReentrantLock& lock, AcquireOptions o,
                                               AcquireHandle* handle = nullptr) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire("r", o, [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
    EXPECT_THAT(h, IsOk());
    if (handle != nullptr && h.ok()) *handle = *h;
    return out;
  }

  std::string Count() {
    auto hash = server_.GetHash(keys_.LockKey("r"));
    if (!hash.has_value()) return "none";
    std::string out;
    for (auto& [field, value] : *hash) {
      if (field != "#fence") out += field + "=" + value + ";";  // the holding's fence
    }
    return out;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  ReentrantLockOptions options_;
  KeyScheme keys_;
};

TEST_F(ReentrantLockTest, DroppedReplyOnNestedAcquireUndoesOnlyThatAcquire) {
  ReentrantLock lock(&loop_, &conn_, options_);
  auto outer = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  ASSERT_THAT(*outer, IsOk());
  conn_.DropNextReplies(1);
  auto nested = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_EQ(Count(), "client:t=2;");  // it ran
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_THAT(*nested, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.RunUntilIdle();
  EXPECT_EQ(Count(), "client:t=1;");  // undone once; the outer hold stays
  // The outer lease still releases normally.
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(**outer, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, IsOk());
  EXPECT_EQ(Count(), "none");
}

TEST_F(ReentrantLockTest, DroppedRequestOnNestedAcquireDecrementsNothing) {
  ReentrantLock lock(&loop_, &conn_, options_);
  auto outer = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  ASSERT_THAT(*outer, IsOk());
  conn_.DropNextRequests(1);
  auto nested = Start(lock, Task("t"));
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_THAT(*nested, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.AdvanceTime(absl::Seconds(1));
  // The undo found no marker: it never ran, so the outer hold is untouched.
  EXPECT_EQ(Count(), "client:t=1;");
}

TEST_F(ReentrantLockTest, DroppedReplyOnFirstAcquireLeavesNoKeyBehind) {
  ReentrantLock lock(&loop_, &conn_, options_);
  conn_.DropNextReplies(1);
  auto r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_EQ(Count(), "client:t=1;");
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.RunUntilIdle();
  EXPECT_EQ(Count(), "none");
  // Nothing but the server's fence mark (and the data-set marker) remains
  // (no acquire marker either).
  EXPECT_EQ(server_.Keys(),
            (std::vector<std::string>{keys_.DataSetKey(), keys_.FenceHwmKey()}));
}

TEST_F(ReentrantLockTest, CancelAfterSendUndoesTheAcquisition) {
  conn_.SetLatency(absl::Milliseconds(10));
  ReentrantLock lock(&loop_, &conn_, options_);
  AcquireHandle handle;
  auto r = Start(lock, Task("t"), &handle);
  loop_.AdvanceTime(absl::Milliseconds(6));
  EXPECT_EQ(Count(), "client:t=1;");
  EXPECT_TRUE(handle.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsUnknown(r->status()));
  EXPECT_EQ(Count(), "none");
}

TEST_F(ReentrantLockTest, DeadlineCountsFromSendAndTtlIsNeverShortenedByANestedAcquire) {
  conn_.SetLatency(absl::Milliseconds(20));
  ReentrantLock lock(&loop_, &conn_, options_);
  const absl::Time sent = loop_.Now();
  auto outer = Start(lock, Task("t", absl::Seconds(10)));
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_THAT(*outer, IsOk());
  EXPECT_EQ((*outer)->deadline, sent + absl::Seconds(10) - absl::Milliseconds(102));
  EXPECT_EQ((*outer)->token, "client:t");
  auto nested = Start(lock, Task("t", absl::Seconds(1)));
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_THAT(*nested, IsOk());
  EXPECT_EQ((*nested)->fence, (*outer)->fence);
  // Applied at 10 ms with PX 10000; now is 40 ms: the 1 s ttl did not shorten it.
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 10000 - 30);
  auto longer = Start(lock, Task("t", absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_THAT(*longer, IsOk());
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 30000 - 10);
}

TEST_F(ReentrantLockTest, WithoutAClientIdEachLockObjectIsItsOwnOwner) {
  ReentrantLock a(&loop_, &conn_);
  ReentrantLock b(&loop_, &conn_);
  EXPECT_NE(a.client_id(), b.client_id());
  EXPECT_EQ(a.client_id().size(), 32u);
  EXPECT_EQ(a.OwnerId("x"), a.client_id() + ":x");
  auto ra = Start(a, Task("t"));
  auto rb = Start(b, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_THAT(*ra, IsOk());
  EXPECT_THAT(*rb, StatusIs(absl::StatusCode::kAborted));
}

TEST_F(ReentrantLockTest, ExpiredHoldCannotBeExtendedOrReleased) {
  ReentrantLock lock(&loop_, &conn_, options_);
  auto r = Start(lock, Task("t", absl::Milliseconds(100)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  loop_.AdvanceTime(absl::Milliseconds(101));  // Redis expires when now > deadline
  absl::StatusOr<Lease> ext = absl::UnknownError("pending");
  ASSERT_THAT(lock.Extend(**r, absl::Seconds(1), [&](absl::StatusOr<Lease> l) { ext = l; }),
              IsOk());
  absl::Status rel = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(**r, [&](absl::Status s) { rel = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(ext, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(rel, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Count(), "none");
}

// Issue 11, defect 6: an inner hold's extend must not shorten the outer
// hold. Outer 30 s; the inner hold extends to 5 s and is released; 6 s later
// the outer lease (which believes it has ~23 s left) must still own the key.
TEST_F(ReentrantLockTest, InnerExtendNeverShortensTheOuterHold) {
  ReentrantLock lock(&loop_, &conn_, options_);
  auto outer = Start(lock, Task("t", absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*outer, IsOk());
  auto inner = Start(lock, Task("t", absl::Seconds(5)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*inner, IsOk());
  const absl::Time sent = loop_.Now();
  absl::StatusOr<Lease> ext = absl::UnknownError("pending");
  ASSERT_THAT(lock.Extend(**inner, absl::Seconds(5),
                          [&](absl::StatusOr<Lease> l) { ext = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(ext, IsOk());
  // The extended lease reports what it asked for (never later than the key).
  EXPECT_EQ(ext->ttl, absl::Seconds(5));
  EXPECT_EQ(ext->deadline, sent + absl::Seconds(5) - absl::Milliseconds(52));
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 30000);
  absl::Status rel = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(*ext, [&](absl::Status s) { rel = s; }), IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(rel, IsOk());
  loop_.AdvanceTime(absl::Seconds(6));
  ASSERT_GT((*outer)->deadline, loop_.Now());
  EXPECT_EQ(Count(), "client:t=1;");
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 24000);
  // A longer extend still raises the TTL.
  absl::StatusOr<Lease> longer = absl::UnknownError("pending");
  ASSERT_THAT(lock.Extend(**outer, absl::Seconds(60),
                          [&](absl::StatusOr<Lease> l) { longer = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(longer, IsOk());
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 60000);
}

// The reentrant acquire script shares the data-set rules (issue 11).
TEST_F(ReentrantLockTest, DataSetRulesForeignDataAndExhaustedFences) {
  ReentrantLockOptions options = options_;
  options.restart_window = absl::Seconds(10);
  ReentrantLock lock(&loop_, &conn_, options);
  server_.Execute({"FLUSHALL"});
  auto r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_TRUE(IsYoungDataSet(r->status())) << r->status();
  loop_.AdvanceTime(absl::Seconds(10));
  r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_EQ((*r)->fence, server_.NowMs() * 1000 + 1)
      << "a missing fence mark starts at the server's TIME in us";
  server_.Execute({"DEL", keys_.LockKey("r")});

  server_.Execute({"SET", keys_.LockKey("r"), "a-string-lock", "PX", "60000"});
  r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(r->status().message(), ::testing::HasSubstr("foreign data under the lock key"));
  server_.Execute({"DEL", keys_.LockKey("r")});
  server_.Execute({"HSET", keys_.LockKey("r"), "someone", "1"});  // no TTL
  r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_THAT(r->status().message(), ::testing::HasSubstr("a hash with no TTL"));
  server_.Execute({"DEL", keys_.LockKey("r")});

  server_.Execute({"SET", keys_.FenceHwmKey(), "9223372036854775807"});
  r = Start(lock, Task("t"));
  loop_.RunUntilIdle();
  EXPECT_THAT(r->status().message(), ::testing::HasSubstr("is exhausted"));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

}  // namespace
}  // namespace dlock
