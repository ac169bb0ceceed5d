// Issue 23, goals 1 and 2, on FakeRedis in virtual time: what dlock leaves
// on a server after N resources were locked and released (O(1): the fence
// high-water mark and the data-set marker), fences that rise per resource
// across the lock key's expiry, FLUSHALL, a restart without persistence, a
// server clock stepped back, and an upgrade from the per-resource counters;
// and what an exclusive acquire touches on the server.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

class FenceHwmTest : public ::testing::Test {
 protected:
  FenceHwmTest() : server_(&loop_), conn_(&loop_, &server_) {}

  // Acquires `resource` with `lock` (one attempt) and returns the lease.
  absl::StatusOr<Lease> Acquire(Lock& lock, const std::string& resource,
                                absl::Duration ttl = absl::Seconds(10)) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    AcquireOptions o;
    o.ttl = ttl;
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire(resource, o, [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
    if (!h.ok()) return h.status();
    loop_.RunUntilIdle();
    return *out;
  }

  absl::Status Release(Lock& lock, const Lease& lease) {
    auto out = std::make_shared<absl::Status>(absl::UnknownError("pending"));
    absl::Status s = lock.Release(lease, [out](absl::Status r) { *out = std::move(r); });
    if (!s.ok()) return s;
    loop_.RunUntilIdle();
    return *out;
  }

  // Acquires and releases `resource`, returning the lease's fence.
  int64_t Cycle(Lock& lock, const std::string& resource) {
    absl::StatusOr<Lease> lease = Acquire(lock, resource);
    EXPECT_THAT(lease, IsOk()) << resource;
    if (!lease.ok()) return -1;
    EXPECT_THAT(Release(lock, *lease), IsOk()) << resource;
    return lease->fence;
  }

  // Cycles `n` distinct resources and checks what is left on the server.
  void ExpectBoundedKeys(Lock& lock, int n) {
    for (int i = 0; i < n; ++i) Cycle(lock, "order:" + std::to_string(i));
    EXPECT_LE(server_.DbSize(), 2u);
    EXPECT_THAT(server_.Keys(),
                UnorderedElementsAre(keys_.DataSetKey(), keys_.FenceHwmKey()));
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  KeyScheme keys_;
};

TEST_F(FenceHwmTest, AThousandResourcesLockedAndReleasedLeaveTwoKeys) {
  SimpleLock lock(&loop_, &conn_);
  ExpectBoundedKeys(lock, 1000);
}

TEST_F(FenceHwmTest, AThousandWritersAndReadersLeaveTwoKeys) {
  ReadWriteLock rw(&loop_, &conn_);
  ExpectBoundedKeys(rw.writer(), 1000);
  ExpectBoundedKeys(rw.reader(), 1000);
}

TEST_F(FenceHwmTest, AThousandSemaphoresLeaveTwoKeys) {
  SemaphoreOptions o;
  o.permits = 3;
  Semaphore sem(&loop_, &conn_, o);
  ExpectBoundedKeys(sem, 1000);
}

TEST_F(FenceHwmTest, AThousandFairLocksLeaveTwoKeys) {
  FairLock fair(&loop_, &conn_);
  ExpectBoundedKeys(fair, 1000);
}

// Fences rise per resource across an expired lock key and a server clock
// stepped back an hour while the mark survives.
TEST_F(FenceHwmTest, FencesRiseAcrossExpiryAndAClockSteppedBack) {
  SimpleLock lock(&loop_, &conn_);
  int64_t last = Cycle(lock, "r");
  absl::StatusOr<Lease> expiring = Acquire(lock, "r", absl::Milliseconds(20));
  ASSERT_THAT(expiring, IsOk());
  EXPECT_GT(expiring->fence, last);
  loop_.AdvanceTime(absl::Milliseconds(30));  // the key expires
  const int64_t after_expiry = Cycle(lock, "r");
  EXPECT_GT(after_expiry, expiring->fence);
  last = after_expiry;
  const int64_t before = server_.NowMs();
  server_.JumpClock(-absl::Hours(1));
  ASSERT_LT(server_.NowMs(), before);
  for (int i = 0; i < 5; ++i) {
    const int64_t fence = Cycle(lock, "r");
    EXPECT_GT(fence, last);
    last = fence;
  }
}

// A FLUSHALL (or a restart without persistence) loses the mark and the
// marker; the fences after it start at the server's TIME in us, above the
// fences before it even within the same millisecond (the old rule started
// them at the new marker x 1000 -- below fences issued faster than one per
// us of the old marker's age).
void ExpectFencesRiseAcrossADataLoss(FenceHwmTest* t, ManualEventLoop& loop, Lock& lock,
                                     const std::function<void()>& lose,
                                     const std::function<int64_t(const std::string&)>& cycle) {
  int64_t last = 0;
  for (int i = 0; i < 300; ++i) {
    const int64_t fence = cycle("r");
    EXPECT_GT(fence, last);
    last = fence;
    loop.AdvanceTime(absl::Microseconds(2));  // a script takes well over 1 us
  }
  lose();
  loop.AdvanceTime(absl::Microseconds(2));
  EXPECT_GT(cycle("r"), last);
  EXPECT_GT(cycle("other"), last);
}

TEST_F(FenceHwmTest, FencesRiseAcrossFlushallWithinOneMillisecond) {
  SimpleLock lock(&loop_, &conn_);
  ExpectFencesRiseAcrossADataLoss(
      this, loop_, lock, [&] { server_.Execute({"FLUSHALL"}); },
      [&](const std::string& r) { return Cycle(lock, r); });
}

TEST_F(FenceHwmTest, FencesRiseAcrossARestartWithoutPersistence) {
  SimpleLock lock(&loop_, &conn_);
  ExpectFencesRiseAcrossADataLoss(
      this, loop_, lock, [&] { server_.Restart(); },
      [&](const std::string& r) { return Cycle(lock, r); });
}

TEST_F(FenceHwmTest, WritersFencesRiseAcrossFlushall) {
  ReadWriteLock rw(&loop_, &conn_);
  ExpectFencesRiseAcrossADataLoss(
      this, loop_, rw.writer(), [&] { server_.Execute({"FLUSHALL"}); },
      [&](const std::string& r) { return Cycle(rw.writer(), r); });
}

// Upgrading from dlock's per-resource counters (P{R}:fence, which started
// at the data-set marker x 1000 and rose by one per acquire, each a script
// run of more than 1 us): every old counter is at most the server's TIME in
// us, so the missing mark, started at TIME, is above all of them -- without
// any acquire reading (or naming) an old counter. The old rule for a
// missing mark under a surviving marker (marker x 1000) went below them.
TEST_F(FenceHwmTest, AnUpgradeIssuesFencesAboveEveryOldPerResourceCounter) {
  const int64_t began = server_.NowMs();
  server_.Execute({"SET", keys_.DataSetKey(), std::to_string(began)});
  // The old data set lived 5 s: at most 5,000,000 acquires on the server;
  // say r saw 4,999,000 of them, s 7.
  loop_.AdvanceTime(absl::Seconds(5));
  const int64_t old_r = began * 1000 + 4999000, old_s = began * 1000 + 7;
  server_.Execute({"SET", keys_.FenceKey("r"), std::to_string(old_r)});
  server_.Execute({"SET", keys_.FenceKey("s"), std::to_string(old_s)});
  ASSERT_LE(old_r, server_.NowMs() * 1000);
  SimpleLock lock(&loop_, &conn_);
  server_.ClearLog();
  const int64_t first = Cycle(lock, "r");
  EXPECT_GT(first, old_r);
  EXPECT_EQ(first, server_.NowMs() * 1000 + 1);
  EXPECT_GT(Cycle(lock, "s"), first);
  ReentrantLockOptions ro;
  ro.client_id = "c";
  ReentrantLock re(&loop_, &conn_, ro);
  ReadWriteLock rw(&loop_, &conn_);
  Semaphore sem(&loop_, &conn_);
  FairLock fair(&loop_, &conn_);
  int64_t last = first;
  for (Lock* l : std::initializer_list<Lock*>{&re, &rw.writer(), &sem, &fair}) {
    const int64_t fence = Cycle(*l, "r");
    EXPECT_GT(fence, last);
    last = fence;
  }
  // No acquire read an old counter: they stay (dlock upgrade-fences folds
  // and deletes them, docs/fences.md).
  for (const FakeRedis::LogEntry& e : server_.log()) {
    for (const std::string& arg : e.argv) {
      EXPECT_NE(arg, keys_.FenceKey("r")) << e.argv[0];
      EXPECT_NE(arg, keys_.FenceKey("s")) << e.argv[0];
    }
  }
  EXPECT_EQ(server_.GetString(keys_.FenceKey("r")), std::to_string(old_r));
}

// A lost mark restarts at TIME: a server clock stepped back across the loss
// by less than the slack (TIME in us minus the mark, which grows by every
// us that did not issue a fence) still issues fences above the old ones.
TEST_F(FenceHwmTest, FencesRiseAcrossALossWithTheClockSteppedBackWithinTheSlack) {
  SimpleLock lock(&loop_, &conn_);
  int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    last = Cycle(lock, "r");
    loop_.AdvanceTime(absl::Microseconds(100));  // 10,000 fences a second
  }
  // The mark is ~1000 above where it started; TIME moved 100,000 us.
  server_.Execute({"FLUSHALL"});
  server_.JumpClock(-absl::Milliseconds(50));
  EXPECT_GT(Cycle(lock, "r"), last);
  EXPECT_GT(Cycle(lock, "other"), last);
}

TEST_F(FenceHwmTest, AReentrantLocksFenceStaysWithItsHolding) {
  server_.Execute(TrustDataSetCommand(keys_));
  SimpleLock plain(&loop_, &conn_);
  ReentrantLockOptions o;
  o.client_id = "c";
  ReentrantLock re(&loop_, &conn_, o);
  absl::StatusOr<Lease> outer = Acquire(re, "r");
  ASSERT_THAT(outer, IsOk());
  Cycle(plain, "x");  // the server's mark moves on
  absl::StatusOr<Lease> inner = Acquire(re, "r");
  ASSERT_THAT(inner, IsOk());
  EXPECT_EQ(inner->fence, outer->fence);
  EXPECT_THAT(Release(re, *inner), IsOk());
  EXPECT_THAT(Release(re, *outer), IsOk());
  EXPECT_GT(Cycle(re, "r"), outer->fence);
}

// Goal 2: with the restart window off and the mark present, an exclusive
// acquire on a free resource is one transaction, MULTI / SET NX PX GET /
// INCR mark / GET marker / EXEC, and no script at all. The writer (still a
// script) runs an existence check of the readers, SET, INCR, the marker's
// GET (a trusted data set's fences are below DLOCK_FENCE_CHECK_BELOW) and
// the DEL of a writer's intent.
std::vector<std::string> ScriptCommands(const FakeRedis& server) {
  std::vector<std::string> out;
  for (const FakeRedis::LogEntry& e : server.log()) {
    if (e.from_script) out.push_back(e.argv[0]);
  }
  return out;
}
std::vector<std::string> AllCommands(const FakeRedis& server) {
  std::vector<std::string> out;
  for (const FakeRedis::LogEntry& e : server.log()) out.push_back(e.argv[0]);
  return out;
}

TEST_F(FenceHwmTest, AnExclusiveAcquireTouchesOnlyWhatItNeeds) {
  server_.Execute(TrustDataSetCommand(keys_));
  SimpleLock lock(&loop_, &conn_);
  Cycle(lock, "warm");
  server_.ClearLog();
  conn_.ClearSent();
  ASSERT_THAT(Acquire(lock, "r"), IsOk());
  EXPECT_THAT(AllCommands(server_), ElementsAre("MULTI", "SET", "INCR", "GET", "EXEC"));
  EXPECT_EQ(conn_.CountSent("EVALSHA"), 0);
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);

  ReadWriteLock rw(&loop_, &conn_);
  server_.ClearLog();
  ASSERT_THAT(Acquire(rw.writer(), "w"), IsOk());
  // The writer: one transaction too (write_acquire_tx.h), no script.
  EXPECT_THAT(AllCommands(server_),
              ElementsAre("MULTI", "SET", "EXISTS", "INCR", "GET", "EXEC"));
  EXPECT_THAT(ScriptCommands(server_), ElementsAre());
}

// The common path with a time marker (the default): the transaction's
// fence is valid when it is above the marker x 1000 (a mark recreated by
// INCRs is far below it); a missing mark goes through AcquireAfterTx once,
// which starts it at TIME.
TEST_F(FenceHwmTest, ALostMarkIsRaisedOnceAndTheCommonPathSendsNoScript) {
  SimpleLock lock(&loop_, &conn_);
  const int64_t first = Cycle(lock, "a");  // no marker, no mark: the rare path
  EXPECT_EQ(first, server_.NowMs() * 1000 + 1);
  conn_.ClearSent();
  const int64_t second = Cycle(lock, "a");
  EXPECT_EQ(second, first + 1);
  EXPECT_EQ(conn_.CountScriptRuns(AcquireAfterTxScript().sha1()), 0);
  EXPECT_EQ(conn_.CountScriptRuns(AcquireScript().sha1()), 0);
  EXPECT_EQ(conn_.CountSent("MULTI"), 1);
  // The mark lost by hand (or a failover to a replica that missed it): the
  // transaction's INCR answers 1, not valid under the marker; the script
  // raises the mark to TIME.
  loop_.AdvanceTime(absl::Milliseconds(5));
  server_.Execute({"DEL", keys_.FenceHwmKey()});
  conn_.ClearSent();
  const int64_t after_loss = Cycle(lock, "a");
  EXPECT_GT(after_loss, second);
  EXPECT_EQ(after_loss, server_.NowMs() * 1000 + 1);
  EXPECT_EQ(conn_.CountScriptRuns(AcquireAfterTxScript().sha1()), 1);
}

// Two clients on a lost mark: A's transaction INCR answers 1, B's 2, both
// before either's rare path. Neither may hand out 1 or 2 (below the fences
// issued before the loss): both are raised past TIME; nor may a script
// acquire (the reentrant lock) that INCRs the recreated mark to 3.
TEST_F(FenceHwmTest, TransactionsRacingOnALostMarkNeverHandOutItsSmallValues) {
  FakeTransport other(&loop_, &server_);
  SimpleLock a(&loop_, &conn_);
  SimpleLock b(&loop_, &other);
  ReentrantLockOptions ro;
  ro.client_id = "c";
  ReentrantLock re(&loop_, &other, ro);
  const int64_t before = Cycle(a, "warm");
  loop_.AdvanceTime(absl::Milliseconds(5));
  server_.Execute({"DEL", keys_.FenceHwmKey()});
  // Both transactions are applied before either's reply comes back.
  conn_.SetLatency(absl::Milliseconds(1), absl::Milliseconds(10));
  other.SetLatency(absl::Milliseconds(2), absl::Milliseconds(10));
  auto got_a = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  auto got_b = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  auto got_re = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  AcquireOptions o;
  o.ttl = absl::Seconds(10);
  ASSERT_THAT(a.Acquire("x", o, [got_a](absl::StatusOr<Lease> r) { *got_a = std::move(r); }),
              IsOk());
  ASSERT_THAT(b.Acquire("y", o, [got_b](absl::StatusOr<Lease> r) { *got_b = std::move(r); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(3));
  EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()), std::optional<std::string>("2"));
  ASSERT_THAT(re.Acquire("z", o, [got_re](absl::StatusOr<Lease> r) { *got_re = std::move(r); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(100));
  ASSERT_THAT(*got_a, IsOk());
  ASSERT_THAT(*got_b, IsOk());
  ASSERT_THAT(*got_re, IsOk());
  for (int64_t fence : {got_a->value().fence, got_b->value().fence, got_re->value().fence}) {
    EXPECT_GT(fence, before);
  }
  EXPECT_NE(got_a->value().fence, got_b->value().fence);
  EXPECT_NE(got_a->value().fence, got_re->value().fence);
  EXPECT_NE(got_b->value().fence, got_re->value().fence);
}

// A refused transaction (the key is held) still INCRs the mark: after a
// loss it recreates it at 1, then 2, ... with no rare path to raise it.
// Every script that reads or INCRs the mark must see that it is not valid
// for the marker: the reader's fence (the mark itself), a semaphore's and
// a writer's (INCR) all stay above every fence issued before the loss.
TEST_F(FenceHwmTest, AMarkRecreatedByRefusedTransactionsIsNeverTrustedByScripts) {
  SimpleLock lock(&loop_, &conn_);
  ReadWriteLock rw(&loop_, &conn_);
  Semaphore sem(&loop_, &conn_);
  server_.Execute({"SET", keys_.DataSetKey(), std::to_string(server_.NowMs())});
  absl::StatusOr<Lease> held = Acquire(lock, "h");
  ASSERT_THAT(held, IsOk());
  EXPECT_EQ(held->fence, server_.NowMs() * 1000 + 1);
  loop_.AdvanceTime(absl::Milliseconds(5));
  server_.Execute({"DEL", keys_.FenceHwmKey()});
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Acquire(lock, "h"), test_support::StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()), std::optional<std::string>("3"));
  absl::StatusOr<Lease> read = Acquire(rw.reader(), "r");
  ASSERT_THAT(read, IsOk());
  EXPECT_GE(read->fence, held->fence);
  EXPECT_GT(Cycle(sem, "s"), held->fence);
  EXPECT_GT(Cycle(rw.writer(), "w"), held->fence);
}

// Foreign data under the lock key: another type (WRONGTYPE from SET GET)
// is refused as foreign data; a string with no TTL reads as held (the
// transaction cannot ask PTTL). Neither keeps a fence; the INCR of the
// refused transaction stays (harmless: fences need only rise).
TEST_F(FenceHwmTest, TheTransactionRefusesForeignDataAndHeldKeys) {
  SimpleLock lock(&loop_, &conn_);
  const int64_t before = Cycle(lock, "warm");
  server_.Execute({"HSET", keys_.LockKey("h"), "f", "v"});
  EXPECT_THAT(Acquire(lock, "h"), test_support::StatusIs(absl::StatusCode::kInternal));
  server_.Execute({"SET", keys_.LockKey("s"), "left-behind"});
  EXPECT_THAT(Acquire(lock, "s"), test_support::StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.GetString(keys_.LockKey("s")), std::optional<std::string>("left-behind"));
  EXPECT_GT(Cycle(lock, "warm"), before + 2);
}

// The restart rule after the fence (script_prelude.h,
// DLOCK_RESTART_RULE_AFTER_FENCE). A fresh data set: the acquire takes the
// lock key and the fence, then the full rule finds the marker it just
// created and refuses ('young'), deleting the lock key and the mark it
// created again. After the window the full rule grants and the mark starts
// at TIME; once TIME is the window past the mark, the acquire does not read
// the marker (SET NX PX GET, INCR, TIME). A refusal with a mark present
// leaves it as it was (DECR). A FLUSHALL of an old data set loses the
// mark: the new mark starts at TIME, the fast check fails and the full rule
// refuses again for the window, and the fences after it still rise.
TEST_F(FenceHwmTest, WithTheWindowOnAnOldMarkSkipsTheMarkerAndAYoungDataSetIsRefused) {
  SimpleLockOptions o;
  o.restart_window = absl::Seconds(30);
  SimpleLock lock(&loop_, &conn_, o);
  ReadWriteLockOptions rwo;
  rwo.restart_window = absl::Seconds(30);
  ReadWriteLock rw(&loop_, &conn_, rwo);
  for (Lock* l : std::initializer_list<Lock*>{&lock, &rw.writer()}) {
    absl::StatusOr<Lease> young = Acquire(*l, "r");
    EXPECT_TRUE(IsYoungDataSet(young.status())) << young.status();
    EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  }
  EXPECT_FALSE(server_.Exists(keys_.FenceHwmKey()));
  EXPECT_TRUE(server_.Exists(keys_.DataSetKey()));

  loop_.AdvanceTime(absl::Seconds(31));
  const int64_t started = Cycle(lock, "r");  // the full rule; the mark starts at TIME
  EXPECT_EQ(started, server_.NowMs() * 1000 + 1);
  // Within the window of the mark's start, a refusal leaves the mark one
  // above (the transaction's INCR stays; the script's own is undone).
  server_.Execute({"SET", keys_.DataSetKey(), std::to_string(server_.NowMs())});
  EXPECT_TRUE(IsYoungDataSet(Acquire(lock, "r").status()));
  EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()), std::to_string(started + 1));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  loop_.AdvanceTime(absl::Seconds(31));
  server_.ClearLog();
  absl::StatusOr<Lease> lease = Acquire(lock, "r");
  ASSERT_THAT(lease, IsOk());
  EXPECT_THAT(AllCommands(server_), ElementsAre("MULTI", "SET", "INCR", "GET", "TIME", "EXEC"));
  ASSERT_THAT(Release(lock, *lease), IsOk());
  server_.ClearLog();
  absl::StatusOr<Lease> written = Acquire(rw.writer(), "w");
  ASSERT_THAT(written, IsOk());
  EXPECT_THAT(AllCommands(server_),
              ElementsAre("MULTI", "SET", "EXISTS", "INCR", "GET", "TIME", "EXEC"));
  ASSERT_THAT(Release(rw.writer(), *written), IsOk());

  server_.Execute({"FLUSHALL"});
  for (Lock* l : std::initializer_list<Lock*>{&lock, &rw.writer()}) {
    absl::StatusOr<Lease> young = Acquire(*l, "r");
    EXPECT_TRUE(IsYoungDataSet(young.status())) << young.status();
    EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  }
  loop_.AdvanceTime(absl::Seconds(31));
  EXPECT_GT(Cycle(lock, "r"), written->fence);
}

// A marker deleted by hand (not a data loss: the mark survives) while the
// mark is older than the window: the fast path passes, since the mark
// proves the data set that old (the full rule would have restarted the
// window); the transaction cannot validate its fence without a marker, so
// the rare path recreates it from the mark (its value in ms). A mark
// raised above TIME (RedLock's write-back of a peer's fence) makes the
// fast check fail: the full rule on the marker read decides, in the
// transaction when the marker is old, in the script when it is young.
TEST_F(FenceHwmTest, TheWindowsFastPathTrustsTheMarkAndFallsBackWhenTheMarkIsAboveTime) {
  SimpleLockOptions o;
  o.restart_window = absl::Seconds(30);
  SimpleLock lock(&loop_, &conn_, o);
  EXPECT_TRUE(IsYoungDataSet(Acquire(lock, "warm").status()));
  loop_.AdvanceTime(absl::Seconds(31));
  const int64_t start = Cycle(lock, "warm");  // the mark starts at TIME
  loop_.AdvanceTime(absl::Seconds(31));
  server_.Execute({"DEL", keys_.DataSetKey()});
  const int64_t before = Cycle(lock, "r");
  EXPECT_EQ(before, start + 2);  // the transaction's INCR, then the script's
  EXPECT_EQ(server_.GetString(keys_.DataSetKey()), std::to_string(start / 1000));

  // A mark ahead of TIME with an old marker: granted by the full rule in
  // the transaction, no script.
  server_.Execute({"SET", keys_.FenceHwmKey(), std::to_string(server_.NowMs() * 1000 + 5000000)});
  server_.ClearLog();
  ASSERT_THAT(Acquire(lock, "r"), IsOk());
  EXPECT_THAT(ScriptCommands(server_), ElementsAre());
  // With a young marker: the script refuses and deletes the lock key.
  server_.Execute({"SET", keys_.DataSetKey(), std::to_string(server_.NowMs())});
  server_.ClearLog();
  absl::StatusOr<Lease> young = Acquire(lock, "q");
  EXPECT_TRUE(IsYoungDataSet(young.status())) << young.status();
  EXPECT_THAT(ScriptCommands(server_),
              ElementsAre("set", "incr", "get", "time", "get", "decr", "del"));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("q")));
}

// INCR answers 1 on a missing mark; a refusal on the missing-mark path (a
// marker that is not a time) must not leave that 1 behind, or the next
// acquire would issue fence 2. Nor the lock key it set.
TEST_F(FenceHwmTest, AMissingMarkRefusedForAForeignMarkerLeavesNoMarkAndNoLockKey) {
  SimpleLock lock(&loop_, &conn_);
  ReadWriteLock rw(&loop_, &conn_);
  Semaphore sem(&loop_, &conn_);
  FairLock fair(&loop_, &conn_);
  ReentrantLockOptions ro;
  ro.client_id = "c";
  ReentrantLock re(&loop_, &conn_, ro);
  for (Lock* l : std::initializer_list<Lock*>{&lock, &rw.writer(), &sem, &fair, &re}) {
    server_.Execute({"SET", keys_.DataSetKey(), "yesterday"});
    absl::StatusOr<Lease> refused = Acquire(*l, "r");
    EXPECT_THAT(refused, test_support::StatusIs(absl::StatusCode::kInternal));
    EXPECT_FALSE(server_.Exists(keys_.FenceHwmKey()));
    EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
    const int64_t now_ms = server_.NowMs();
    server_.Execute({"SET", keys_.DataSetKey(), std::to_string(now_ms)});
    EXPECT_EQ(Cycle(*l, "r"), now_ms * 1000 + 1);
    server_.Execute({"DEL", keys_.FenceHwmKey()});
  }
}

// Fencing off (SimpleLockOptions::fencing): the acquire is SET NX PX alone
// -- no fence mark read or written, nothing left after the release -- and
// every lease's fence is 0; a held lock and foreign data are refused as
// with fencing on, and the restart rule still applies when its window is on.
TEST_F(FenceHwmTest, WithFencingOffAnAcquireIsSetNxPxAlone) {
  SimpleLockOptions o;
  o.fencing = false;
  SimpleLock lock(&loop_, &conn_, o);
  server_.ClearLog();
  absl::StatusOr<Lease> lease = Acquire(lock, "r");
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->fence, 0);
  // The window off too: no script at all, one plain SET NX PX GET.
  std::vector<std::vector<std::string>> sent;
  for (const FakeRedis::LogEntry& e : server_.log()) sent.push_back(e.argv);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_THAT(sent[0], ElementsAre("SET", keys_.LockKey("r"), lease->token, "NX", "PX",
                                   ::testing::_, "GET"));
  EXPECT_THAT(server_.Keys(), ElementsAre(keys_.LockKey("r")));
  EXPECT_THAT(Acquire(lock, "r"), test_support::StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(Release(lock, *lease), IsOk());
  EXPECT_EQ(server_.DbSize(), 0u);

  server_.Execute({"HSET", keys_.LockKey("h"), "f", "v"});
  EXPECT_THAT(Acquire(lock, "h"), test_support::StatusIs(absl::StatusCode::kInternal));
  // What the plain command gives up: a string with no TTL reads as held.
  server_.Execute({"SET", keys_.LockKey("s"), "left-behind"});
  EXPECT_THAT(Acquire(lock, "s"), test_support::StatusIs(absl::StatusCode::kAborted));

  SimpleLockOptions windowed = o;
  windowed.restart_window = absl::Seconds(30);
  SimpleLock young(&loop_, &conn_, windowed);
  absl::StatusOr<Lease> refused = Acquire(young, "y");
  EXPECT_THAT(refused, test_support::StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(IsYoungDataSet(refused.status())) << refused.status();
  EXPECT_EQ(server_.Execute({"EXISTS", keys_.FenceHwmKey()}), Reply::Integer(0));
}

}  // namespace
}  // namespace dlock
