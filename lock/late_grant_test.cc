// Late grants of the single-server primitives on FakeRedis in virtual time
// (issue 22): a grant that arrives when nobody can use it any more -- its
// acquire was cancelled, the wait that sent it ran out, or it came after the
// lease's local deadline -- is released again, so no key, permit or reader
// entry outlives it, and the observer reports it (OnLateGrant). One case
// per primitive and way of arriving late: SimpleLock, Semaphore, the
// read-write lock's reader and writer, FairLock (one try and a wait), and
// MultiLock (a sub-lease granted after the multi-lock was cancelled).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/acquire_result.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StartAcquire;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

AcquireOptions Ttl(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

// Records each late grant as "policy operation resource reason".
struct LateGrants : LockObserver {
  void OnLateGrant(const LateGrantEvent& e) override {
    EXPECT_EQ(e.server, -1);
    seen.push_back(absl::StrCat(e.policy, " ", e.operation, " ", e.resource, " ", e.reason));
  }
  std::vector<std::string> seen;
};

class LateGrantTest : public ::testing::Test {
 protected:
  LateGrantTest() : server_(&loop_), conn_(&loop_, &server_) {
    for (auto scripts : {AllScripts(), SemaphoreScripts(), FairScripts()}) {
      for (const NamedScript& s : scripts) {
        server_.Execute({"SCRIPT", "LOAD", s.script->source()});
      }
    }
    server_.Execute(TrustDataSetCommand(keys_));
    server_.ClearLog();
  }

  // Every command is applied 5 ms after it is sent and answered 20 ms later:
  // an acquire sent at t has taken its key at t + 5 ms, but its sender hears
  // of it only at t + 25 ms.
  void SlowReplies() { conn_.SetLatency(absl::Milliseconds(5), absl::Milliseconds(20)); }

  template <typename Options>
  Options Observed() {
    Options o;
    o.observer = &late_;
    return o;
  }

  bool Exists(const std::string& key) {
    return server_.Execute({"EXISTS", key}) == Reply::Integer(1);
  }
  int64_t Permits(absl::string_view resource) {
    return server_.Execute({"ZCARD", keys_.LockKey(resource)}).integer;
  }
  int64_t Readers(absl::string_view resource) {
    return server_.Execute({"HLEN", ReadersKey(keys_, resource)}).integer;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  KeyScheme keys_;
  LateGrants late_;
};

TEST_F(LateGrantTest, SimpleLocksCancelledAcquireGrantedLaterIsReleasedAndReported) {
  SimpleLock lock(&loop_, &conn_, Observed<SimpleLockOptions>());
  SlowReplies();
  AcquireHandle h;
  auto out = StartAcquire(lock, "r", Ttl(absl::Seconds(30)), &h);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_TRUE(Exists(keys_.LockKey("r")));  // granted; the reply is on its way
  EXPECT_TRUE(h.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(Exists(keys_.LockKey("r")));
  EXPECT_TRUE(absl::IsUnknown(out->status()));  // the callback never ran
  EXPECT_THAT(late_.seen, ElementsAre("simple acquire r cancelled"));
}

TEST_F(LateGrantTest, SimpleLocksGrantAfterTheLeaseDeadlineIsReleasedAndReported) {
  SimpleLock lock(&loop_, &conn_, Observed<SimpleLockOptions>());
  // Applied 90 ms after the send (the key lives until 190 ms), answered at
  // 150 ms: past the 100 ms lease's local deadline (97 ms).
  conn_.SetLatency(absl::Milliseconds(90), absl::Milliseconds(60));
  auto out = StartAcquire(lock, "r", Ttl(absl::Milliseconds(100)));
  loop_.AdvanceTime(absl::Milliseconds(100));
  conn_.SetLatency(absl::ZeroDuration());  // the release goes straight through
  EXPECT_TRUE(Exists(keys_.LockKey("r")));
  loop_.AdvanceTime(absl::Milliseconds(50));
  EXPECT_THAT(*out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_FALSE(Exists(keys_.LockKey("r")));
  EXPECT_EQ(server_.CountInLog("DEL"), 1);  // released, not expired
  EXPECT_THAT(late_.seen, ElementsAre("simple acquire r expired"));
}

// A RetryLock's wait runs out with an attempt in flight; that attempt was
// granted: the permit is given back when its reply arrives.
TEST_F(LateGrantTest, SemaphorePermitGrantedAfterTheWaitRanOutIsGivenBackAndReported) {
  SemaphoreOptions so = Observed<SemaphoreOptions>();
  so.permits = 2;
  Semaphore sem(&loop_, &conn_, so);
  RetryLock waiting(&loop_, &sem);
  SlowReplies();
  auto out = StartAcquire(waiting, "pool", Ttl(absl::Seconds(30), absl::Milliseconds(15)));
  loop_.AdvanceTime(absl::Milliseconds(15));
  EXPECT_THAT(*out, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("abandoned")));
  EXPECT_EQ(Permits("pool"), 1);  // taken at 5 ms; its reply comes at 25 ms
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_EQ(Permits("pool"), 0);
  EXPECT_THAT(late_.seen, ElementsAre("semaphore acquire pool cancelled"));
}

TEST_F(LateGrantTest, ReadersAndWritersCancelledGrantsAreReleasedAndReported) {
  ReadWriteLock rw(&loop_, &conn_, Observed<ReadWriteLockOptions>());
  SlowReplies();
  AcquireHandle reader, writer;
  StartAcquire(rw.reader(), "doc", Ttl(absl::Seconds(30)), &reader);
  StartAcquire(rw.writer(), "other", Ttl(absl::Seconds(30)), &writer);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_EQ(Readers("doc"), 1);
  EXPECT_TRUE(Exists(keys_.LockKey("other")));
  EXPECT_TRUE(reader.Cancel());
  EXPECT_TRUE(writer.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_EQ(Readers("doc"), 0);
  EXPECT_FALSE(Exists(keys_.LockKey("other")));
  EXPECT_THAT(late_.seen,
              ElementsAre("read acquire doc cancelled", "write acquire other cancelled"));
}

TEST_F(LateGrantTest, FairLocksCancelledTryGrantedLaterIsReleasedAndReported) {
  FairLock fair(&loop_, &conn_, Observed<FairLockOptions>());
  SlowReplies();
  AcquireHandle h;
  StartAcquire(fair, "q", Ttl(absl::Seconds(30)), &h);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_TRUE(Exists(keys_.LockKey("q")));
  EXPECT_TRUE(h.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(Exists(keys_.LockKey("q")));
  EXPECT_THAT(late_.seen, ElementsAre("fair acquire q cancelled"));
}

// The fair wait's deadline passes with an attempt in flight that took the
// lock. The Leave sent at the deadline fails here (an error reply: not
// retried), so it is the grant's reply, when it arrives, that releases it
// again (and is reported); nothing stays.
TEST_F(LateGrantTest, FairWaitGrantedAfterItsDeadlineIsReleasedAndReported) {
  FairLock fair(&loop_, &conn_, Observed<FairLockOptions>());
  SlowReplies();
  auto out = StartAcquire(fair, "q", Ttl(absl::Seconds(30), absl::Milliseconds(15)));
  loop_.AdvanceTime(absl::Milliseconds(14));
  conn_.FailNextWithReply(1, Reply::Error("ERR injected"));  // the Leave at 15 ms
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(*out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(Exists(keys_.LockKey("q")));
  EXPECT_THAT(late_.seen, ElementsAre("fair acquire q cancelled"));
}

// A grant of the fair wait that came after its lease's deadline is given
// back, and the wait goes on to a usable lease.
TEST_F(LateGrantTest, FairWaitsGrantAfterTheLeaseDeadlineIsReleasedAndTheWaitGoesOn) {
  FairLock fair(&loop_, &conn_, Observed<FairLockOptions>());
  conn_.SetLatency(absl::Milliseconds(5), absl::Milliseconds(145));
  auto out = StartAcquire(fair, "q", Ttl(absl::Milliseconds(100), absl::Seconds(5)));
  loop_.AdvanceTime(absl::Milliseconds(140));
  conn_.SetLatency(absl::Milliseconds(1));  // the next attempt is fast
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_THAT(*out, IsOk());
  EXPECT_EQ(server_.Execute({"GET", keys_.LockKey("q")}), Reply::String((*out)->token));
  EXPECT_THAT(late_.seen, ElementsAre("fair acquire q expired"));
}

// MultiLock: cancelled while its second sub-acquire is in flight. The first
// lease is released at once; the second resource, granted meanwhile, when
// its reply arrives (the inner lock's late grant).
TEST_F(LateGrantTest, AMultiLockSubLeaseGrantedAfterTheCancelIsReleasedAndReported) {
  SimpleLock simple(&loop_, &conn_, Observed<SimpleLockOptions>());
  MultiLock multi(&loop_, &simple);
  SlowReplies();
  bool ran = false;
  absl::StatusOr<AcquireHandle> h = multi.Acquire(
      {"a", "b"}, Ttl(absl::Seconds(30)),
      [&](absl::StatusOr<std::vector<Lease>>) { ran = true; });
  ASSERT_THAT(h, IsOk());
  loop_.AdvanceTime(absl::Milliseconds(35));  // a granted at 25 ms; b sent then
  EXPECT_TRUE(Exists(keys_.LockKey("a")));
  EXPECT_TRUE(Exists(keys_.LockKey("b")));  // applied at 30 ms, reply at 50 ms
  EXPECT_TRUE(h->Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(ran);
  EXPECT_FALSE(Exists(keys_.LockKey("a")));
  EXPECT_FALSE(Exists(keys_.LockKey("b")));
  EXPECT_THAT(late_.seen, ElementsAre("simple acquire b cancelled"));
}

}  // namespace
}  // namespace dlock
