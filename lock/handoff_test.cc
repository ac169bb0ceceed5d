// RetryLock's cross-client hand-off queue (handoff_scripts.h) on FakeRedis
// in virtual time: separate clients -- each its own connection, SimpleLock
// and RetryLock, as separate processes would be -- waiting for one
// resource. A release hands the lock to exactly one of them, in the order
// they queued; a lost hand-off, a dead waiter, a waiter that gives up and a
// lock nobody waits for are each covered.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;

AcquireOptions Wait(absl::Duration wait) {
  AcquireOptions o;
  o.ttl = absl::Seconds(30);
  o.wait = wait;
  return o;
}

// One separate client: its own connection, SimpleLock and RetryLock (which
// a test may destroy: `owned.reset()`, then `retry` must not be used).
struct Client {
  Client(ManualEventLoop* loop, FakeRedis* server, RetryLockOptions o)
      : conn(loop, server),
        simple(loop, &conn),
        owned(std::make_unique<RetryLock>(loop, &simple, std::move(o))),
        retry(*owned) {}
  FakeTransport conn;
  SimpleLock simple;
  std::unique_ptr<RetryLock> owned;
  RetryLock& retry;
  std::shared_ptr<absl::StatusOr<Lease>> result;
};

class HandOffTest : public ::testing::Test {
 protected:
  HandOffTest() : server_(&loop_) {}

  Client& AddClient(RetryLockOptions o = RetryLockOptions()) {
    clients_.push_back(std::make_unique<Client>(&loop_, &server_, std::move(o)));
    return *clients_.back();
  }

  void Start(Client& c, absl::Duration wait = absl::Seconds(60)) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    ASSERT_THAT(c.retry.Acquire("r", Wait(wait),
                                [out](absl::StatusOr<Lease> r) { *out = std::move(r); }),
                IsOk());
    c.result = out;
  }

  static bool Holds(const Client& c) { return c.result != nullptr && c.result->ok(); }

  void Release(Client& c) {
    ASSERT_TRUE(Holds(c));
    Lease l = **c.result;
    c.result = nullptr;
    ASSERT_THAT(c.retry.Release(l, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
  }

  int64_t TotalAttempts() const {
    int64_t n = 0;
    for (const auto& c : clients_) n += c->owned != nullptr ? c->retry.attempts() : 0;
    return n;
  }

  // Index of the one client holding the lock; -1 if none, -2 if several.
  int Holder() const {
    int h = -1;
    for (size_t i = 0; i < clients_.size(); ++i) {
      if (Holds(*clients_[i])) h = h == -1 ? static_cast<int>(i) : -2;
    }
    return h;
  }

  int64_t QueueLength() {
    Reply r = server_.Execute({"ZCARD", HandOffQueueKey(keys_.ChannelKey("r"))});
    return r.is_integer() ? r.integer : -1;
  }

  // Scripts run (EVALSHA / EVAL) since the log was cleared, and whether any
  // command named one of the queue's keys.
  int ScriptsRun() const {
    int n = 0;
    for (const FakeRedis::LogEntry& e : server_.log()) {
      const std::string cmd = absl::AsciiStrToLower(e.argv[0]);
      n += !e.from_script && (cmd == "evalsha" || cmd == "eval");
    }
    return n;
  }
  bool QueueKeysNamed() const {
    const std::string q = HandOffQueueKey(keys_.ChannelKey("r"));
    for (const FakeRedis::LogEntry& e : server_.log()) {
      for (const std::string& a : e.argv) {
        if (absl::StartsWith(a, q)) return true;
      }
    }
    return false;
  }

  // Two clients taking turns until `a`, which came back for the lock soon
  // after releasing it, releases again and keeps its entry at the tail: `b`
  // then holds (its entry at the head), `a` waits for nothing (lingers).
  void KeepAnEntryAtTheTail(Client& a, Client& b) {
    Start(a);
    loop_.RunUntilIdle();
    Start(b);
    loop_.RunUntilIdle();
    ASSERT_EQ(QueueLength(), 1);
    Release(a);  // a plain release: b takes it; a learns of the contention
    loop_.RunUntilIdle();
    ASSERT_TRUE(Holds(b));
    Start(a);  // back soon: joins first
    loop_.RunUntilIdle();
    EXPECT_FALSE(Holds(a));
    Release(b);  // hands to a; b came back for nothing yet: no entry kept
    loop_.RunUntilIdle();
    ASSERT_TRUE(Holds(a));
    EXPECT_EQ(QueueLength(), 1);  // a (holding, at the head)
    Start(b);  // b back soon: joins
    loop_.RunUntilIdle();
    EXPECT_EQ(QueueLength(), 2);
    Release(a);  // hands to b; a keeps its entry at the tail (it came back before)
    loop_.RunUntilIdle();
    ASSERT_TRUE(Holds(b));
    ASSERT_EQ(QueueLength(), 2);  // b (holding) and a
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  KeyScheme keys_;
  std::vector<std::unique_ptr<Client>> clients_;
};

// Each release hands the lock to one waiter -- the one that queued first --
// at one attempt per hand-over; the others sleep through it.
TEST_F(HandOffTest, EachReleaseHandsToExactlyOneWaiterInQueueOrder) {
  constexpr int kWaiters = 5;
  Client& first = AddClient();
  Start(first);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(first));
  for (int i = 0; i < kWaiters; ++i) {
    Start(AddClient());
    loop_.RunUntilIdle();  // refused, subscribed, queued (in this order)
  }
  EXPECT_EQ(QueueLength(), kWaiters);
  const int64_t before = TotalAttempts();
  for (int turn = 1; turn <= kWaiters; ++turn) {
    Release(*clients_[turn - 1]);
    loop_.RunUntilIdle();
    EXPECT_EQ(Holder(), turn) << "turn " << turn;
    EXPECT_EQ(TotalAttempts(), before + turn) << "one attempt per hand-over";
  }
  Release(*clients_[kWaiters]);
  loop_.RunUntilIdle();
  // Nothing of the queue is left on the server.
  EXPECT_FALSE(server_.Exists(HandOffQueueKey(keys_.ChannelKey("r"))));
  EXPECT_FALSE(server_.Exists(HandOffQueueExpiryKey(keys_.ChannelKey("r"))));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

// The commands the server ran, in order, each as its name and (for a
// script) its number of KEYS: what a cycle costs the server, whatever the
// script's SHA-1.
std::vector<std::string> Work(const FakeRedis& server) {
  std::vector<std::string> out;
  for (const FakeRedis::LogEntry& e : server.log()) {
    std::string cmd = absl::AsciiStrToLower(e.argv[0]);
    if (cmd == "evalsha" || cmd == "eval") cmd = absl::StrCat("script/", e.argv[2]);
    out.push_back(e.from_script ? absl::StrCat("  ", cmd) : cmd);
  }
  return out;
}

// With nobody waiting, a release through RetryLock costs the server exactly
// what SimpleLock's plain release costs: one script naming the lock key
// alone, running GET, DEL and PUBLISH; no command names a queue key.
TEST_F(HandOffTest, WithNobodyWaitingAReleaseCostsWhatThePlainReleaseCosts) {
  Client& c = AddClient();
  // Warm both paths' script caches (a first EVALSHA meets NOSCRIPT).
  for (bool through_retry : {false, true}) {
    Start(c);
    loop_.RunUntilIdle();
    ASSERT_TRUE(Holds(c));
    Lease l = **c.result;
    c.result = nullptr;
    Lock& lock = through_retry ? static_cast<Lock&>(c.retry) : c.simple;
    ASSERT_THAT(lock.Release(l, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
    loop_.RunUntilIdle();
  }
  std::vector<std::string> work[2];
  for (bool through_retry : {false, true}) {
    Start(c);
    loop_.RunUntilIdle();
    ASSERT_TRUE(Holds(c));
    Lease l = **c.result;
    c.result = nullptr;
    server_.ClearLog();
    Lock& lock = through_retry ? static_cast<Lock&>(c.retry) : c.simple;
    ASSERT_THAT(lock.Release(l, [](absl::Status s) { EXPECT_THAT(s, IsOk()); }), IsOk());
    loop_.RunUntilIdle();
    work[through_retry] = Work(server_);
    EXPECT_FALSE(QueueKeysNamed());
  }
  EXPECT_EQ(work[1], work[0]);
  EXPECT_EQ(work[1], (std::vector<std::string>{"script/1", "  get", "  del", "  publish"}));
  EXPECT_EQ(c.retry.queue_calls(), 0);
}

// A contended resource goes back to the plain release once its contention
// is over (the group lingers kHandOffLinger, then the client forgets it).
TEST_F(HandOffTest, AfterTheContentionTheReleaseIsPlainAgain) {
  Client& a = AddClient();
  Client& b = AddClient();
  Start(a);
  loop_.RunUntilIdle();
  Start(b);
  loop_.RunUntilIdle();
  Release(a);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(b));
  Release(b);
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(3));  // lingering groups and entries gone
  loop_.RunUntilIdle();
  EXPECT_EQ(a.retry.subscriptions() + b.retry.subscriptions(), 0u);
  server_.ClearLog();
  Start(b);
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(b));
  Release(b);
  loop_.RunUntilIdle();
  EXPECT_FALSE(QueueKeysNamed());
  // A release, nothing else (the acquire is a MULTI/EXEC: docs/fences.md).
  EXPECT_EQ(ScriptsRun(), 1);
}

// A hand-off whose message is lost (here: the server refuses the PUBLISH)
// still ends in the lock: the waiter's backoff timer refreshes its entry,
// and the queue tells the granted head to attempt.
TEST_F(HandOffTest, ALostHandOffStillGetsTheLockByTheRefresh) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(40);
  o.max_backoff = absl::Milliseconds(40);
  o.jitter = [](absl::Duration cap) { return cap; };
  Client& holder = AddClient(o);
  Client& waiter = AddClient(o);
  Start(holder);
  loop_.RunUntilIdle();
  Start(waiter);
  loop_.RunUntilIdle();
  ASSERT_EQ(QueueLength(), 1);
  server_.DenyChannels(true);  // the release's hand-off message is lost
  Release(holder);
  loop_.RunUntilIdle();
  EXPECT_FALSE(Holds(waiter));
  loop_.AdvanceTime(absl::Milliseconds(40));  // the backoff timer: a refresh
  loop_.RunUntilIdle();
  EXPECT_TRUE(Holds(waiter));
}

// A waiter that died at the head of the queue (no leave, hears nothing)
// holds the others up at most for the grace of its hand-off plus one
// refresh period: the grant lapses and the next refresh skips it.
TEST_F(HandOffTest, ADeadHeadWaiterDoesNotStallTheLockBeyondTheGrace) {
  RetryLockOptions o;
  o.initial_backoff = absl::Milliseconds(150);
  o.max_backoff = absl::Milliseconds(150);
  o.jitter = [](absl::Duration cap) { return cap; };
  Client& holder = AddClient(o);
  Client& dead = AddClient(o);
  Client& next = AddClient(o);
  Start(holder);
  loop_.RunUntilIdle();
  Start(dead);
  loop_.RunUntilIdle();
  Start(next);
  loop_.RunUntilIdle();
  ASSERT_EQ(QueueLength(), 2);
  dead.conn.Partition();  // gone: hears nothing, sends nothing
  Release(holder);
  loop_.RunUntilIdle();
  EXPECT_EQ(Holder(), -1);  // handed to the dead head
  loop_.AdvanceTime(absl::Milliseconds(150));  // next's refresh: the grant still runs
  loop_.RunUntilIdle();
  EXPECT_EQ(Holder(), -1);
  loop_.AdvanceTime(absl::Milliseconds(150));  // past the 200 ms grace
  loop_.RunUntilIdle();
  EXPECT_EQ(Holder(), 2);
  EXPECT_FALSE(Holds(dead));
}

// A waiter whose entry expired (its client died long ago) is skipped by the
// release at once.
TEST_F(HandOffTest, AnExpiredEntryIsSkippedByTheRelease) {
  RetryLockOptions o;
  o.initial_backoff = absl::Seconds(10);
  o.max_backoff = absl::Seconds(10);
  o.jitter = [](absl::Duration cap) { return cap; };
  Client& holder = AddClient(o);
  Client& next = AddClient(o);
  Start(holder);
  loop_.RunUntilIdle();
  const std::string ch = keys_.ChannelKey("r");
  const int64_t now_ms = absl::ToUnixMillis(loop_.Now());
  server_.Execute({"ZADD", HandOffQueueKey(ch), "1", "dead"});
  server_.Execute({"ZADD", HandOffQueueExpiryKey(ch), absl::StrCat(now_ms - 1), "dead"});
  Start(next);
  loop_.RunUntilIdle();
  ASSERT_EQ(QueueLength(), 2);
  Release(holder);
  loop_.RunUntilIdle();
  EXPECT_TRUE(Holds(next));  // at once, not after a grace or a backoff
}

// A waiter cancelled (or out of time) leaves the queue: the next release
// goes straight to the one behind it.
TEST_F(HandOffTest, ACancelledWaiterLeavesTheQueue) {
  Client& holder = AddClient();
  Client& quitter = AddClient();
  Client& next = AddClient();
  Start(holder);
  loop_.RunUntilIdle();
  auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  absl::StatusOr<AcquireHandle> h = quitter.retry.Acquire(
      "r", Wait(absl::Seconds(60)), [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
  ASSERT_THAT(h, IsOk());
  loop_.RunUntilIdle();
  Start(next);
  loop_.RunUntilIdle();
  ASSERT_EQ(QueueLength(), 2);
  EXPECT_TRUE(h->Cancel());
  loop_.RunUntilIdle();
  EXPECT_EQ(QueueLength(), 1);
  Release(holder);
  loop_.RunUntilIdle();
  EXPECT_TRUE(Holds(next));
  EXPECT_TRUE(absl::IsUnknown(out->status()));
}

// How a wait ends without the lock.
enum class GiveUp { kCancel, kDeadline, kDestroy };

// A wait that ends without the lock while its first join is still on the
// way to the server (cancelled, out of time, or its RetryLock destroyed)
// leaves the queue once the join lands: the next release goes to the live
// waiter behind it at once, with no 200 ms grace spent on the one that left.
class HandOffGiveUpTest : public HandOffTest,
                          public ::testing::WithParamInterface<GiveUp> {
 public:
  void Run() {
    constexpr absl::Duration kLeg = absl::Milliseconds(5);  // each way
    // The backoff pinned (full jitter would let a random early timer's
    // attempt, not the join, be on the way when the wait ends).
    RetryLockOptions pinned;
    pinned.jitter = [](absl::Duration cap) { return cap; };
    Client& holder = AddClient();
    Client& quitter = AddClient(pinned);
    Client& next = AddClient();
    Start(holder);
    loop_.RunUntilIdle();
    Start(next);
    loop_.RunUntilIdle();
    ASSERT_EQ(QueueLength(), 1);
    quitter.conn.SetLatency(kLeg, kLeg);
    // On this schedule (virtual time) the join is sent at 20 ms: the refused
    // attempt's round trip, then the two SUBSCRIBEs'. A deadline of 22 ms
    // falls while it is still on the way (it lands at 25 ms).
    const absl::Duration wait =
        GetParam() == GiveUp::kDeadline ? absl::Milliseconds(22) : absl::Seconds(60);
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    absl::StatusOr<AcquireHandle> h = quitter.retry.Acquire(
        "r", Wait(wait), [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
    ASSERT_THAT(h, IsOk());
    for (int i = 0; i < 100 && quitter.retry.queue_calls() == 0; ++i) {
      loop_.AdvanceTime(absl::Milliseconds(1));
    }
    ASSERT_EQ(quitter.retry.queue_calls(), 1);
    ASSERT_EQ(QueueLength(), 1) << "the join is still on the way";
    switch (GetParam()) {
      case GiveUp::kCancel:
        EXPECT_TRUE(h->Cancel());
        break;
      case GiveUp::kDeadline:
        loop_.AdvanceTime(absl::Milliseconds(2));
        ASSERT_EQ(QueueLength(), 1) << "the deadline came before the join landed";
        EXPECT_TRUE(absl::IsDeadlineExceeded(out->status())) << out->status();
        break;
      case GiveUp::kDestroy:
        quitter.owned.reset();
        break;
    }
    loop_.AdvanceTime(4 * kLeg);  // the join lands, then the leave behind it
    loop_.RunUntilIdle();
    EXPECT_EQ(QueueLength(), 1) << "only `next` is queued";
    Release(holder);
    loop_.RunUntilIdle();  // no time passes: no grace, no refresh
    EXPECT_TRUE(Holds(next));
    if (GetParam() != GiveUp::kDeadline) {
      EXPECT_TRUE(absl::IsUnknown(out->status()));
    }
  }
};

TEST_P(HandOffGiveUpTest, AWaitThatEndsWhileItsJoinIsOnTheWayLeavesTheQueue) { Run(); }

INSTANTIATE_TEST_SUITE_P(EachWayToGiveUp, HandOffGiveUpTest,
                         ::testing::Values(GiveUp::kCancel, GiveUp::kDeadline, GiveUp::kDestroy));

// A RetryLock destroyed while a waiter is queued, or while its group
// lingers with the entry its release kept at the tail (it came back for
// the lock before), takes its entry out of the queue: the next release
// goes to a live waiter at once instead of to the entry of a RetryLock that
// no longer exists (200 ms of grace, then a refresh).
TEST_F(HandOffTest, ADestroyedRetryLockLeavesNoEntryBehind) {
  Client& a = AddClient();
  Client& b = AddClient();
  Client& c = AddClient();
  ASSERT_NO_FATAL_FAILURE(KeepAnEntryAtTheTail(a, b));  // b holds; a's entry kept
  a.owned.reset();                                     // within the linger
  loop_.RunUntilIdle();
  EXPECT_EQ(QueueLength(), 1);
  Start(c);  // a live waiter behind
  loop_.RunUntilIdle();
  Release(b);
  loop_.RunUntilIdle();  // no time passes
  EXPECT_TRUE(Holds(c));
}

// A client that came back for the lock soon after releasing it keeps its
// entry at the tail when it releases (it usually takes the lock again
// soon); a one-shot client does not. Clients that stop contending pass a
// hand-off made to them on at once (a leave), so the lock is not held up:
// here both stop, and a newcomer gets the lock at its first attempt.
TEST_F(HandOffTest, AClientThatStopsContendingPassesItsHandOffOn) {
  Client& a = AddClient();
  Client& b = AddClient();
  ASSERT_NO_FATAL_FAILURE(KeepAnEntryAtTheTail(a, b));
  Release(b);  // hands to a, which no longer waits: it passes it on, to b,
  loop_.RunUntilIdle();  // which passes it on too
  EXPECT_EQ(QueueLength(), 0);
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  Client& c = AddClient();
  Start(c, absl::ZeroDuration());
  loop_.RunUntilIdle();
  EXPECT_TRUE(Holds(c));
  EXPECT_EQ(c.retry.attempts(), 1);
  Release(c);
  loop_.AdvanceTime(absl::Seconds(5));  // lingering groups leave; entries expire
  loop_.RunUntilIdle();
  EXPECT_FALSE(server_.Exists(HandOffQueueKey(keys_.ChannelKey("r"))));
}

// A one-shot client (it releases and never comes back, as `dlock run`)
// leaves no entry in the queue behind it.
TEST_F(HandOffTest, AOneShotClientLeavesNoEntryBehind) {
  Client& a = AddClient();
  Client& b = AddClient();
  Client& c = AddClient();
  Start(a);
  loop_.RunUntilIdle();
  Start(b);
  loop_.RunUntilIdle();
  Start(c);
  loop_.RunUntilIdle();
  Release(a);  // plain: b, the head, takes it
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(b));
  Release(b);  // hands to c; b does not come back
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(c));
  EXPECT_EQ(QueueLength(), 1);  // c alone
  Release(c);
  loop_.RunUntilIdle();
  EXPECT_EQ(QueueLength(), 0);
}

// Clients that take the lock again right after each release (the worst
// case for barging) share it evenly, at about one attempt per critical
// section: a client that queued moments ago joins the queue before its next
// attempt instead of racing the waiter the release handed the lock to.
TEST_F(HandOffTest, BusyClientsShareTheLockFairlyWithOneAttemptEach) {
  constexpr int kClients = 6;
  constexpr int kSections = 120;
  for (int i = 0; i < kClients; ++i) AddClient();
  std::vector<int> got(kClients, 0);
  for (int i = 0; i < kClients; ++i) Start(*clients_[i]);
  int sections = 0;
  while (sections < kSections) {
    loop_.RunUntilIdle();
    const int h = Holder();
    ASSERT_GE(h, 0) << "section " << sections;
    ++got[h];
    ++sections;
    Release(*clients_[h]);
    Start(*clients_[h]);  // at once, in the same turn
    loop_.AdvanceTime(absl::Milliseconds(1));
  }
  for (int i = 0; i < kClients; ++i) {
    EXPECT_GE(got[i], kSections / kClients / 2) << "client " << i;
  }
  const double per_section =
      static_cast<double>(TotalAttempts() - kClients) / kSections;  // first tries aside
  EXPECT_LE(per_section, 1.5);
}

// Every key a script of the hand-off round touches (release with and
// without a queue, join, refresh, leave, the acquires) is one of its KEYS,
// as Redis Cluster and script effects replication require; the queue
// scripts' keys all in the resource's slot. Read off the server's log.
TEST_F(HandOffTest, EveryKeyTheScriptsTouchIsDeclaredInKeys) {
  server_.ClearLog();
  Client& holder = AddClient();
  Client& quitter = AddClient();
  Client& next = AddClient();
  Start(holder);
  loop_.RunUntilIdle();
  auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  absl::StatusOr<AcquireHandle> h = quitter.retry.Acquire(
      "r", Wait(absl::Seconds(60)), [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
  ASSERT_THAT(h, IsOk());
  loop_.RunUntilIdle();
  Start(next);
  loop_.RunUntilIdle();
  ASSERT_EQ(QueueLength(), 2);
  quitter.conn.Partition();  // its attempt never goes out
  Release(holder);           // hands off to `quitter`
  loop_.RunUntilIdle();
  ASSERT_FALSE(Holds(next));
  EXPECT_TRUE(h->Cancel());  // its leave is lost with it; the grace ends it
  loop_.AdvanceTime(absl::Seconds(2));
  loop_.RunUntilIdle();
  ASSERT_TRUE(Holds(next));
  Release(next);
  loop_.RunUntilIdle();

  const int slot = KeySlot(keys_.LockKey("r"));
  std::vector<std::string> declared;
  int scripts = 0, queue_scripts = 0, checked = 0;
  for (const FakeRedis::LogEntry& e : server_.log()) {
    const std::string cmd = absl::AsciiStrToLower(e.argv[0]);
    if (!e.from_script) {
      declared.clear();
      if (cmd != "evalsha" && cmd != "eval") continue;
      ++scripts;
      const int n = std::stoi(e.argv[2]);
      const bool queue_script = e.argv[1] == HandOffReleaseScript().sha1() ||
                                e.argv[1] == HandOffQueueScript().sha1();
      queue_scripts += queue_script;
      for (int i = 0; i < n; ++i) {
        declared.push_back(e.argv[3 + i]);
        if (queue_script) {
          EXPECT_EQ(KeySlot(e.argv[3 + i]), slot) << e.argv[3 + i];
        }
      }
      continue;
    }
    if (cmd == "time" || cmd == "publish") continue;  // no key
    ASSERT_GE(e.argv.size(), 2u) << cmd;
    ++checked;
    EXPECT_NE(std::find(declared.begin(), declared.end(), e.argv[1]), declared.end())
        << cmd << " " << e.argv[1] << " is not in the script's KEYS";
  }
  EXPECT_GE(queue_scripts, 3);
  EXPECT_GT(checked, scripts);
}

}  // namespace
}  // namespace dlock
