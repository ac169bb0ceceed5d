// ReadWriteLock on FakeRedis in virtual time: readers overlap, a writer
// excludes readers and other writers, a waiting writer keeps new readers out
// (no writer starvation) for a bounded time, each reader's lease expires on
// its own, fences increase across writers, the writer and the plain lock
// exclude each other, cancelled and unknown acquires leave nothing behind.
#include "dlock/lock/read_write_lock.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

AcquireOptions Opts(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

using Result = std::shared_ptr<absl::StatusOr<Lease>>;

class ReadWriteLockTest : public ::testing::Test {
 protected:
  ReadWriteLockTest()
      : server_(&loop_),
        conn_a_(&loop_, &server_),
        conn_b_(&loop_, &server_),
        a_(&loop_, &conn_a_),
        b_(&loop_, &conn_b_) {
    server_.Execute(TrustDataSetCommand(keys_));
  }

  // Starts an acquire on `lock`; the result stays "pending" (kUnknown)
  // until the callback ran.
  Result Start(Lock& lock, absl::string_view resource, AcquireOptions options,
               AcquireHandle* handle = nullptr) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    absl::StatusOr<AcquireHandle> h = lock.Acquire(
        resource, options, [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
    EXPECT_THAT(h, IsOk());
    if (handle != nullptr && h.ok()) *handle = *h;
    return out;
  }

  absl::StatusOr<Lease> Take(Lock& lock, absl::string_view resource,
                             absl::Duration ttl = absl::Seconds(60)) {
    Result r = Start(lock, resource, Opts(ttl));
    loop_.RunUntilIdle();
    return *r;
  }

  absl::Status Release(Lock& lock, const Lease& lease) {
    absl::Status out = absl::UnknownError("pending");
    EXPECT_THAT(lock.Release(lease, [&](absl::Status s) { out = s; }), IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  absl::StatusOr<Lease> Extend(Lock& lock, const Lease& lease, absl::Duration ttl) {
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    EXPECT_THAT(lock.Extend(lease, ttl, [&](absl::StatusOr<Lease> r) { out = r; }), IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  int64_t Readers(absl::string_view resource) {
    Reply r = server_.Execute({"HLEN", ReadersKey(keys_, resource)});
    return r.is_integer() ? r.integer : -1;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_a_;
  FakeTransport conn_b_;
  ReadWriteLock a_;  // one process
  ReadWriteLock b_;  // another
  KeyScheme keys_;
};

TEST_F(ReadWriteLockTest, ReadersOverlapEachWithItsOwnToken) {
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg");
  absl::StatusOr<Lease> r2 = Take(b_.reader(), "cfg");
  absl::StatusOr<Lease> r3 = Take(a_.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  ASSERT_THAT(r3, IsOk());
  EXPECT_NE(r1->token, r2->token);
  EXPECT_NE(r1->token, r3->token);
  EXPECT_EQ(Readers("cfg"), 3);
  EXPECT_THAT(Release(a_.reader(), *r1), IsOk());
  EXPECT_THAT(Release(a_.reader(), *r1), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Readers("cfg"), 2);
}

TEST_F(ReadWriteLockTest, AWriterExcludesReadersAndWriters) {
  absl::StatusOr<Lease> w = Take(a_.writer(), "cfg");
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Take(b_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Release(a_.writer(), *w), IsOk());
  // b's writer tried and is now "waiting": it goes before new readers.
  EXPECT_THAT(Take(b_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<Lease> w2 = Take(b_.writer(), "cfg");
  ASSERT_THAT(w2, IsOk());
  EXPECT_THAT(Release(b_.writer(), *w2), IsOk());
  EXPECT_THAT(Take(a_.reader(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, ReadersExcludeAWriterUntilTheLastOneLeaves) {
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg");
  absl::StatusOr<Lease> r2 = Take(b_.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  EXPECT_THAT(Take(a_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Release(a_.reader(), *r1), IsOk());
  EXPECT_THAT(Take(a_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Release(b_.reader(), *r2), IsOk());
  EXPECT_THAT(Take(a_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, AWaitingWriterKeepsNewReadersOutForItsIntentTtl) {
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  // A write attempt fails on the reader and marks the writer as waiting.
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Take(a_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  // A writer that stops trying blocks readers for writer_intent_ttl (3 s)
  // at most, not forever.
  // (A key lives until its expiry has passed, as in Redis.)
  loop_.AdvanceTime(absl::Seconds(3));
  EXPECT_THAT(Take(a_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(Take(a_.reader(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, ZeroIntentTtlIsReaderPreference) {
  ReadWriteLockOptions o;
  o.writer_intent_ttl = absl::ZeroDuration();
  ReadWriteLock c(&loop_, &conn_b_, o);
  ASSERT_THAT(Take(a_.reader(), "cfg"), IsOk());
  EXPECT_THAT(Take(c.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Take(a_.reader(), "cfg"), IsOk());
}

// Readers keep coming (a new one every 100 ms, each holding 1 s, so their
// holds always overlap) while a writer waits through a RetryLock: without
// the intent marker the writer would never see a moment without readers.
TEST_F(ReadWriteLockTest, AWriterIsNotStarvedByOverlappingReaders) {
  RetryLockOptions ro;
  ro.jitter = [](absl::Duration cap) { return cap; };
  RetryLock writers(&loop_, &b_.writer(), ro);
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Lease> r = Take(a_.reader(), "cfg", absl::Seconds(1));
    ASSERT_THAT(r, IsOk());
    held.push_back(*r);
  }
  Result w = Start(writers, "cfg", Opts(absl::Seconds(10), absl::Seconds(20)));
  loop_.RunUntilIdle();  // its first attempt fails on the readers
  int readers_in = 0;
  int readers_refused = 0;
  bool overlap_seen = false;
  for (int i = 0; i < 100 && absl::IsUnknown(w->status()); ++i) {
    absl::StatusOr<Lease> r = Take(a_.reader(), "cfg", absl::Seconds(1));
    if (r.ok()) {
      ++readers_in;
      held.push_back(*r);
    } else {
      ++readers_refused;
    }
    // Each reader leaves after 1 s (release, not expiry).
    loop_.AdvanceTime(absl::Milliseconds(100));
    if (held.size() >= 10) {
      EXPECT_THAT(Release(a_.reader(), held.front()), IsOk());
      held.erase(held.begin());
    }
    overlap_seen |= held.size() >= 2;
  }
  ASSERT_THAT(*w, IsOk());
  EXPECT_TRUE(overlap_seen);
  EXPECT_GT(readers_refused, 0);
  // No reader got in once the writer waited.
  EXPECT_EQ(readers_in, 0);
  // Once the writer holds, every reader is refused.
  EXPECT_THAT(Take(a_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
}

TEST_F(ReadWriteLockTest, ACrashedReadersLeaseExpiresOnItsOwn) {
  absl::StatusOr<Lease> crashed = Take(a_.reader(), "cfg", absl::Seconds(1));
  absl::StatusOr<Lease> alive = Take(b_.reader(), "cfg", absl::Seconds(60));
  ASSERT_THAT(crashed, IsOk());
  ASSERT_THAT(alive, IsOk());
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(Extend(a_.reader(), *crashed, absl::Seconds(5)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Release(a_.reader(), *crashed),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Extend(b_.reader(), *alive, absl::Seconds(5)), IsOk());
  EXPECT_THAT(Release(b_.reader(), *alive), IsOk());
  // The crashed reader no longer counts: a writer gets in.
  EXPECT_THAT(Take(b_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, AReadersExtendMovesOnlyItsOwnExpiry) {
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg", absl::Seconds(1));
  absl::StatusOr<Lease> r2 = Take(b_.reader(), "cfg", absl::Seconds(1));
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  loop_.AdvanceTime(absl::Milliseconds(900));
  absl::StatusOr<Lease> e = Extend(a_.reader(), *r1, absl::Seconds(2));
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(e->ttl, absl::Seconds(2));
  loop_.AdvanceTime(absl::Milliseconds(100));
  // r2 expired, r1 lives on until 2.9 s.
  EXPECT_EQ(Readers("cfg"), 2);  // trimmed lazily...
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(Readers("cfg"), 1);  // ...by the next script
  EXPECT_THAT(Release(b_.reader(), *r2), StatusIs(absl::StatusCode::kFailedPrecondition));
  loop_.AdvanceTime(absl::Milliseconds(1900));
  server_.Execute({"DEL", WriterIntentKey(keys_, "cfg")});
  EXPECT_THAT(Take(b_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, TheWatchdogRenewsAReader) {
  Watchdog watchdog(&loop_, &a_.reader());
  absl::StatusOr<Lease> r = Take(a_.reader(), "cfg", absl::Milliseconds(300));
  ASSERT_THAT(r, IsOk());
  bool lost = false;
  WatchOptions wo;
  wo.on_lost = [&lost](absl::Status) { lost = true; };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*r, std::move(wo));
  ASSERT_THAT(watch, IsOk());
  for (int i = 0; i < 50; ++i) loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(lost);
  EXPECT_TRUE(watch->IsValid());
  EXPECT_EQ(Readers("cfg"), 1);
  watch->Stop();
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(Take(b_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, FencesIncreaseAcrossWritersAndReadersGetTheCurrentOne) {
  absl::StatusOr<Lease> w1 = Take(a_.writer(), "cfg");
  ASSERT_THAT(w1, IsOk());
  EXPECT_GE(w1->fence, 1);
  ASSERT_THAT(Release(a_.writer(), *w1), IsOk());
  absl::StatusOr<Lease> r = Take(b_.reader(), "cfg");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->fence, w1->fence);
  ASSERT_THAT(Release(b_.reader(), *r), IsOk());
  absl::StatusOr<Lease> w2 = Take(b_.writer(), "cfg");
  ASSERT_THAT(w2, IsOk());
  EXPECT_GT(w2->fence, w1->fence);
  ASSERT_THAT(Release(b_.writer(), *w2), IsOk());
  // The plain lock shares the counter.
  SimpleLock plain(&loop_, &conn_a_);
  absl::StatusOr<Lease> p = Take(plain, "cfg");
  ASSERT_THAT(p, IsOk());
  EXPECT_GT(p->fence, w2->fence);
}

TEST_F(ReadWriteLockTest, TheWriterAndThePlainLockExcludeEachOther) {
  SimpleLock plain(&loop_, &conn_a_);
  absl::StatusOr<Lease> p = Take(plain, "cfg");
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Take(b_.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(Release(plain, *p), IsOk());
  server_.Execute({"DEL", WriterIntentKey(keys_, "cfg")});
  absl::StatusOr<Lease> w = Take(b_.writer(), "cfg");
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Take(plain, "cfg"), StatusIs(absl::StatusCode::kAborted));
  // The writer's lease is a plain lock lease: the plain release frees it.
  EXPECT_THAT(Release(plain, *w), IsOk());
}

TEST_F(ReadWriteLockTest, AWaitingWriterIsWokenByTheLastReadersRelease) {
  RetryLockOptions ro;
  ro.initial_backoff = absl::Seconds(10);  // only a notification can wake it early
  ro.max_backoff = absl::Seconds(10);
  ro.jitter = [](absl::Duration cap) { return cap; };
  RetryLock writers(&loop_, &b_.writer(), ro);
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg");
  absl::StatusOr<Lease> r2 = Take(a_.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  Result w = Start(writers, "cfg", Opts(absl::Seconds(10), absl::Seconds(60)));
  loop_.AdvanceTime(absl::Milliseconds(10));
  ASSERT_TRUE(absl::IsUnknown(w->status()));
  ASSERT_THAT(Release(a_.reader(), *r1), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_TRUE(absl::IsUnknown(w->status()));
  ASSERT_THAT(Release(a_.reader(), *r2), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*w, IsOk());
}

TEST_F(ReadWriteLockTest, ACancelledReadAcquireLeavesNoReaderBehind) {
  AcquireHandle h;
  Result r = Start(a_.reader(), "cfg", Opts(absl::Seconds(60)), &h);
  EXPECT_TRUE(h.Cancel());
  loop_.RunUntilIdle();
  EXPECT_TRUE(absl::IsUnknown(r->status()));
  EXPECT_EQ(Readers("cfg"), 0);
  EXPECT_THAT(Take(b_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, AReadAcquireWhoseReplyIsLostLeavesNoReaderBehind) {
  conn_a_.DropNextReplies(1);
  Result r = Start(a_.reader(), "cfg", Opts(absl::Seconds(60)));
  loop_.AdvanceTime(absl::Seconds(3));  // the 2 s command timeout
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.RunUntilIdle();
  EXPECT_EQ(Readers("cfg"), 0);
  EXPECT_THAT(Take(b_.writer(), "cfg"), IsOk());
}

TEST_F(ReadWriteLockTest, BadInputIsRejectedByTheCall) {
  auto cb = [](absl::StatusOr<Lease>) { ADD_FAILURE() << "callback ran"; };
  EXPECT_THAT(a_.reader().Acquire("", Opts(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a_.writer().Acquire("r", Opts(absl::ZeroDuration()), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Lease empty;
  empty.resource = "r";
  EXPECT_THAT(a_.reader().Release(empty, [](absl::Status) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a_.writer().Extend(empty, absl::Seconds(1), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ReadWriteLockOptions o;
  o.writer_intent_ttl = absl::Milliseconds(-1);
  ReadWriteLock bad(&loop_, &conn_a_, o);
  EXPECT_THAT(bad.writer().Acquire("r", Opts(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.RunUntilIdle();
}

TEST_F(ReadWriteLockTest, ForeignDataUnderTheReadersKeyIsInternal) {
  server_.Execute({"SET", ReadersKey(keys_, "cfg"), "x"});
  EXPECT_THAT(Take(a_.reader(), "cfg"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(Take(a_.writer(), "cfg"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(server_.Execute({"GET", ReadersKey(keys_, "cfg")}).str, "x");
}

TEST_F(ReadWriteLockTest, TheRestartWindowRefusesReadersAndWriters) {
  FakeRedis fresh(&loop_);
  FakeTransport conn(&loop_, &fresh);
  ReadWriteLockOptions o;
  o.restart_window = absl::Seconds(30);
  ReadWriteLock lock(&loop_, &conn, o);
  EXPECT_THAT(Take(lock.reader(), "cfg"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Take(lock.writer(), "cfg"), StatusIs(absl::StatusCode::kUnavailable));
  loop_.AdvanceTime(absl::Seconds(30));
  EXPECT_THAT(Take(lock.reader(), "cfg"), IsOk());
}

// ---- The writer's transaction (write_acquire_tx.h) -------------------------

std::vector<std::string> Commands(const FakeRedis& server, bool from_script) {
  std::vector<std::string> out;
  for (const FakeRedis::LogEntry& e : server.log()) {
    if (e.from_script == from_script) out.push_back(e.argv[0]);
  }
  return out;
}

// On a free resource the writer sends one transaction and no script; its
// release is the plain lock's.
TEST_F(ReadWriteLockTest, AFreeWriterAcquireIsOneTransaction) {
  server_.ClearLog();
  conn_a_.ClearSent();
  absl::StatusOr<Lease> w = Take(a_.writer(), "cfg");
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Commands(server_, false),
              ::testing::ElementsAre("MULTI", "SET", "EXISTS", "INCR", "GET", "EXEC"));
  EXPECT_THAT(Commands(server_, true), ::testing::IsEmpty());
  EXPECT_EQ(conn_a_.CountSent("EVALSHA") + conn_a_.CountSent("EVAL"), 0);
  EXPECT_EQ(server_.GetString(keys_.LockKey("cfg")), std::optional<std::string>(w->token));
}

// A live reader: the transaction's SET takes the key, its EXISTS sees the
// readers hash; the rare path refuses the writer, deletes the key again,
// sets the intent, and adds no fence of its own (the transaction's INCR
// stays: the next reader's fence is >= every writer's before it, < the
// next writer's).
TEST_F(ReadWriteLockTest, ALiveReaderRefusesTheWritersTransactionAndLeavesNoKey) {
  absl::StatusOr<Lease> w0 = Take(a_.writer(), "cfg");
  ASSERT_THAT(w0, IsOk());
  ASSERT_THAT(Release(a_.writer(), *w0), IsOk());
  absl::StatusOr<Lease> r = Take(a_.reader(), "cfg");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->fence, w0->fence);
  conn_b_.ClearSent();
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(conn_b_.CountSent("MULTI"), 1);
  EXPECT_EQ(conn_b_.CountScriptRuns(WriteAfterTxScript().sha1()), 1);
  EXPECT_EQ(server_.GetString(keys_.LockKey("cfg")), std::nullopt);
  EXPECT_TRUE(server_.GetString(WriterIntentKey(keys_, "cfg")).has_value());
  EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()),
            std::optional<std::string>(std::to_string(w0->fence + 1)));
  EXPECT_EQ(Readers("cfg"), 1);
  ASSERT_THAT(Release(a_.reader(), *r), IsOk());
  absl::StatusOr<Lease> w1 = Take(b_.writer(), "cfg");
  ASSERT_THAT(w1, IsOk());
  EXPECT_GT(w1->fence, w0->fence + 1);
}

// Interleavings around the transaction (each step a separate arrival at
// the server): a reader that lands before it refuses the writer; one that
// lands between the writer's EXEC and its rare-path script finds the
// writer's key and is refused too (then the intent keeps it out); the
// writer is never granted while a reader holds, and nothing is left of it.
TEST_F(ReadWriteLockTest, AReaderRacingTheWritersTransactionNeverOverlapsIt) {
  FakeTransport conn_c(&loop_, &server_);
  ReadWriteLock c(&loop_, &conn_c);
  absl::StatusOr<Lease> r1 = Take(a_.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  conn_b_.SetLatency(absl::Milliseconds(1), absl::Milliseconds(10));   // EXEC at 1 ms
  conn_c.SetLatency(absl::Milliseconds(5), absl::Milliseconds(10));    // reader at 5 ms
  Result w = Start(b_.writer(), "cfg", Opts(absl::Seconds(60)));
  Result r2 = Start(c.reader(), "cfg", Opts(absl::Seconds(60)));
  loop_.AdvanceTime(absl::Milliseconds(3));
  // The transaction ran: our key is there while the rare path is pending.
  EXPECT_TRUE(server_.GetString(keys_.LockKey("cfg")).has_value());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_THAT(*w, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(*r2, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.GetString(keys_.LockKey("cfg")), std::nullopt);
  EXPECT_EQ(Readers("cfg"), 1);
}

// The intent of a writer refused earlier: the next writer's transaction
// sees it (EXISTS), and the rare path grants and deletes it, as the script
// does, so readers get in again after the writer's release.
TEST_F(ReadWriteLockTest, TheRarePathClearsTheIntentOnAGrant) {
  absl::StatusOr<Lease> r = Take(a_.reader(), "cfg");
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(Release(a_.reader(), *r), IsOk());
  conn_b_.ClearSent();
  absl::StatusOr<Lease> w = Take(b_.writer(), "cfg");
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(conn_b_.CountScriptRuns(WriteAfterTxScript().sha1()), 1);
  EXPECT_EQ(server_.GetString(WriterIntentKey(keys_, "cfg")), std::nullopt);
  EXPECT_EQ(server_.GetString(keys_.LockKey("cfg")), std::optional<std::string>(w->token));
  ASSERT_THAT(Release(b_.writer(), *w), IsOk());
  EXPECT_THAT(Take(a_.reader(), "cfg"), IsOk());
}

// A refused SET (a plain holder; a string with no TTL, foreign data) goes
// to the rare path, which sets the intent and tells foreign data as the
// script does; the holder's key is untouched.
TEST_F(ReadWriteLockTest, ARefusedSetGoesToTheRarePath) {
  SimpleLock plain(&loop_, &conn_a_);
  absl::StatusOr<Lease> p = Take(plain, "cfg");
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(Take(b_.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.GetString(keys_.LockKey("cfg")), std::optional<std::string>(p->token));
  EXPECT_TRUE(server_.GetString(WriterIntentKey(keys_, "cfg")).has_value());
  server_.Execute({"SET", keys_.LockKey("bare"), "left-behind"});
  EXPECT_THAT(Take(b_.writer(), "bare"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(server_.GetString(keys_.LockKey("bare")),
            std::optional<std::string>("left-behind"));
}

}  // namespace
}  // namespace dlock
