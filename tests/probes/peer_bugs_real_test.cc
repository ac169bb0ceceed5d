// Peers' known bugs as probes (issue 22, item 5): each test re-enacts a bug
// reported against another Redis lock library, on real redis-server
// processes (started per test on free loopback ports), and asserts that
// dlock does not have it. Each test is named after the peer's bug:
//
//   Redisson3194 (and #2515 for a failover, sentinel_probe_test.cc): the
//     watchdog stops renewing after the connection is lost and comes back.
//   Redisson7272: the watchdog renews a lease after it was unlocked.
//   ShedLock2583: unlock (or extend) after the lease expired deletes (or
//     prolongs) the key of the next holder.
//   RedlockRb3: a SET that timed out on the client but succeeded on the
//     server is never released: the key blocks everyone for its TTL.
//   NodeRedlock169: RedLock's validity is counted from the start of the
//     first attempt, not from the attempt that won.
//
// Waits are bounded runs of the real loop until an event (no sleeps); a
// lease's expiry is waited for by running the loop past its TTL.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/probes/renewal_probe.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::RedisServerOptions;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWaitLimit = absl::Seconds(20);

// Forwards to a Lock and counts the Extends it forwarded: lets a test see
// every renewal the watchdog asks for, and act while one is on the wire.
class ExtendSpyLock : public Lock {
 public:
  explicit ExtendSpyLock(Lock* inner) : inner_(inner) {}
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override {
    return inner_->Acquire(resource, options, std::move(callback));
  }
  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return inner_->Release(lease, std::move(callback));
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    ++extends;
    absl::Status s = inner_->Extend(lease, ttl, std::move(callback));
    if (on_next_extend) {
      std::function<void()> act = std::move(on_next_extend);
      on_next_extend = nullptr;
      act();
    }
    return s;
  }
  int extends = 0;
  // Called once, right after the next Extend was forwarded (the extend is
  // then in flight).
  std::function<void()> on_next_extend;

 private:
  Lock* inner_;
};

class PeerBugsRealTest : public ::testing::Test {
 protected:
  ~PeerBugsRealTest() override {
    for (auto& t : transports_) t->Close();
    transports_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);  // nothing leaked on the loop
  }

  void StartServers(int n, RedisServerOptions options = {}) {
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start(options);
      ASSERT_THAT(s, IsOk());
      servers_.push_back(*std::move(s));
    }
  }

  // A connected client of server i that reconnects quickly.
  HiredisTransport* Client(int i = 0) {
    HiredisTransportOptions o;
    o.port = servers_[i]->port();
    o.reconnect_backoff_min = absl::Milliseconds(20);
    o.reconnect_backoff_max = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<HiredisTransport>> t = HiredisTransport::Create(uv_.get(), o);
    EXPECT_THAT(t, IsOk());
    if (!t.ok()) return nullptr;
    transports_.push_back(*std::move(t));
    EXPECT_THAT(uv_.ConnectAndWait(*transports_.back()), IsOk());
    return transports_.back().get();
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, const std::string& resource, absl::Duration ttl) {
    std::optional<absl::StatusOr<Lease>> out;
    AcquireOptions o;
    o.ttl = ttl;
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!h.ok()) return h.status();
    EXPECT_TRUE(uv_.RunUntil([&] { return out.has_value(); }, kWaitLimit));
    return out.value_or(absl::InternalError("acquire never called back"));
  }

  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    std::optional<absl::Status> out;
    absl::Status s = lock.Release(lease, [&](absl::Status r) { out = std::move(r); });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return out.has_value(); }, kWaitLimit));
    return out.value_or(absl::InternalError("release never called back"));
  }

  absl::StatusOr<Lease> ExtendNow(Lock& lock, const Lease& lease, absl::Duration ttl) {
    std::optional<absl::StatusOr<Lease>> out;
    absl::Status s = lock.Extend(lease, ttl, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return out.has_value(); }, kWaitLimit));
    return out.value_or(absl::InternalError("extend never called back"));
  }

  Reply Server(int i, std::vector<std::string> argv) {
    absl::StatusOr<Reply> r = servers_[i]->Command(std::move(argv));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  // Calls of `command` (e.g. "evalsha") since the last CONFIG RESETSTAT.
  int64_t CommandCalls(int i, const std::string& command) {
    const std::string info = Server(i, {"INFO", "commandstats"}).str;
    const std::string field = absl::StrCat("cmdstat_", command, ":calls=");
    const size_t at = info.find(field);
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + field.size()));
  }

  // Watches `lease` on `dog` and runs the loop until `renewals` renewals
  // succeeded (bounded). Returns the watch.
  WatchHandle WatchAndRenew(Watchdog& dog, const Lease& lease, bool* lost, absl::Status* why) {
    absl::StatusOr<WatchHandle> watch = dog.Watch(lease, test_support::RecordLoss(lost, why));
    EXPECT_THAT(watch, IsOk());
    return watch.ok() ? *std::move(watch) : WatchHandle();
  }

  // "job" acquired with `ttl` from `holder` and watched (renewed every
  // `renew_interval` when given) by a Watchdog of its own whose renewals
  // `renewals` counts; `lost` and `why` record a loss. Fatal failures: call
  // with ASSERT_NO_FATAL_FAILURE.
  struct WatchedJob {
    absl::StatusOr<Lease> lease = absl::UnknownError("not acquired");
    test_support::RenewalCounter renewals;
    std::unique_ptr<Watchdog> dog;
    bool lost = false;
    absl::Status why;
    WatchHandle watch;
  };
  void AcquireAndWatch(Lock& holder, absl::Duration ttl, WatchedJob* job,
                       std::optional<absl::Duration> renew_interval = std::nullopt) {
    job->lease = AcquireNow(holder, "job", ttl);
    ASSERT_THAT(job->lease, IsOk());
    job->dog = std::make_unique<Watchdog>(loop_.get(), &holder,
                                          test_support::CountRenewals(&job->renewals));
    absl::StatusOr<WatchHandle> watch = job->dog->Watch(
        *job->lease, test_support::RecordLoss(&job->lost, &job->why, renew_interval));
    ASSERT_THAT(watch, IsOk());
    job->watch = *std::move(watch);
    ASSERT_TRUE(job->watch.active());
  }

  test_support::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_ = std::make_unique<UvEventLoop>(uv_.get());
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<HiredisTransport>> transports_;
  KeyScheme keys_;
};

// redisson#3194: after a reconnect the renewal task was gone and the lock
// expired under its holder. Here the server kills every client connection
// (CLIENT KILL TYPE normal): once between renewals, then twice while a
// renewal is in flight (its reply is lost with the connection). The
// watchdog keeps renewing over the reconnected transport, the lease is
// never lost, the key keeps the holder's token.
TEST_F(PeerBugsRealTest, Redisson3194_RenewalContinuesAfterTheConnectionIsKilled) {
  StartServers(1);
  SimpleLock simple(loop_.get(), Client());
  ExtendSpyLock holder(&simple);
  const absl::Duration ttl = absl::Seconds(1);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job));

  int kills = 0;
  auto kill_clients = [&] {
    const Reply killed = Server(0, {"CLIENT", "KILL", "TYPE", "normal"});
    ASSERT_TRUE(killed.is_integer()) << killed.DebugString();
    ASSERT_GE(killed.integer, 1);
    ++kills;
  };
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round == 0 ? "killed between renewals" : "killed with a renewal in flight");
    const int before = job.renewals.ok;
    ASSERT_TRUE(
        uv_.RunUntil([&] { return job.lost || job.renewals.ok >= before + 1; }, kWaitLimit));
    ASSERT_FALSE(job.lost) << job.why;
    if (round == 0) {
      kill_clients();
    } else {
      holder.on_next_extend = [&] { loop_->RunAfter(absl::ZeroDuration(), kill_clients); };
      ASSERT_TRUE(uv_.RunUntil([&] { return job.lost || kills == round + 1; }, kWaitLimit));
    }
    // Renewals go on after the reconnect: two more succeed.
    const int after_kill = job.renewals.ok;
    EXPECT_TRUE(
        uv_.RunUntil([&] { return job.lost || job.renewals.ok >= after_kill + 2; }, kWaitLimit))
        << "renewal stopped after the connection was killed";
    ASSERT_FALSE(job.lost) << job.why;
  }
  EXPECT_TRUE(job.watch.active());
  EXPECT_TRUE(job.watch.IsValid());
  EXPECT_EQ(Server(0, {"GET", keys_.LockKey("job")}), Reply::String(job.lease->token));
  EXPECT_GT(job.watch.lease().deadline, job.lease->deadline + 2 * ttl);
  bool released = false;
  ASSERT_THAT(job.watch.Release([&](absl::Status s) {
    EXPECT_THAT(s, IsOk());
    released = true;
  }),
              IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return released; }, kWaitLimit));
}

// redisson#3194 with a server restart: the server persists with AOF
// (fsync always) and is killed with SIGKILL while a renewal is in flight,
// then restarted on the same port. The key survives; the watchdog
// reconnects and keeps renewing.
TEST_F(PeerBugsRealTest, Redisson3194_RenewalContinuesAfterAnAofServerRestart) {
  RedisServerOptions aof;
  aof.appendonly = true;
  StartServers(1, aof);
  SimpleLock simple(loop_.get(), Client());
  ExtendSpyLock holder(&simple);
  // Long enough that the restart (the loop does not run meanwhile) fits
  // well inside one lease on a loaded machine.
  const absl::Duration ttl = absl::Seconds(6);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job, absl::Milliseconds(500)));
  ASSERT_TRUE(uv_.RunUntil([&] { return job.lost || job.renewals.ok >= 1; }, kWaitLimit));
  ASSERT_FALSE(job.lost) << job.why;

  bool restarted = false;
  holder.on_next_extend = [&] {
    loop_->RunAfter(absl::ZeroDuration(), [&] {
      ASSERT_THAT(servers_[0]->Kill(), IsOk());
      ASSERT_THAT(servers_[0]->Restart(), IsOk());
      restarted = true;
    });
  };
  ASSERT_TRUE(uv_.RunUntil([&] { return job.lost || restarted; }, kWaitLimit));
  ASSERT_EQ(Server(0, {"GET", keys_.LockKey("job")}), Reply::String(job.lease->token))
      << "the AOF did not keep the key: the probe needs it";
  const int after_restart = job.renewals.ok;
  EXPECT_TRUE(
      uv_.RunUntil([&] { return job.lost || job.renewals.ok >= after_restart + 3; }, kWaitLimit))
      << "renewal stopped after the server restart";
  ASSERT_FALSE(job.lost) << job.why;
  EXPECT_TRUE(job.watch.IsValid());
  EXPECT_EQ(Server(0, {"GET", keys_.LockKey("job")}), Reply::String(job.lease->token));
  // Renewed after the restart: the server's TTL was set again recently.
  const Reply pttl = Server(0, {"PTTL", keys_.LockKey("job")});
  ASSERT_TRUE(pttl.is_integer());
  EXPECT_GT(pttl.integer, absl::ToInt64Milliseconds(ttl) - 2000);
  job.watch.Stop();
}

// redisson#7272: after unlock the watchdog's renewal task kept running. Here
// the holder releases while a renewal is in flight (right after the
// watchdog sent it), and also between renewals: the release wins, the key
// is gone, and no renewal command reaches the server afterwards (INFO
// commandstats counts no script call), however long we wait.
TEST_F(PeerBugsRealTest, Redisson7272_WatchdogNeverRenewsAfterUnlock) {
  StartServers(1);
  SimpleLock simple(loop_.get(), Client());
  ExtendSpyLock holder(&simple);
  test_support::RenewalCounter renewals;
  Watchdog dog(loop_.get(), &holder, test_support::CountRenewals(&renewals));
  const absl::Duration ttl = absl::Milliseconds(300);  // renewed every 100 ms

  for (bool in_flight : {true, false}) {
    SCOPED_TRACE(in_flight ? "released while a renewal is in flight"
                           : "released between renewals");
    const std::string resource = in_flight ? "in-flight" : "between";
    absl::StatusOr<Lease> lease = AcquireNow(holder, resource, ttl);
    ASSERT_THAT(lease, IsOk());
    bool lost = false;
    absl::Status why;
    WatchHandle watch = WatchAndRenew(dog, *lease, &lost, &why);
    const int first = renewals.ok;
    ASSERT_TRUE(uv_.RunUntil([&] { return lost || renewals.ok >= first + 2; }, kWaitLimit));
    ASSERT_FALSE(lost) << why;

    std::optional<absl::Status> released;
    auto release = [&] {
      ASSERT_THAT(watch.Release([&](absl::Status s) { released = std::move(s); }), IsOk());
    };
    int extends_at_release = -1;
    if (in_flight) {
      // Release on the loop turn after the next renewal went out: its
      // reply is not read yet.
      holder.on_next_extend = [&] {
        loop_->RunAfter(absl::ZeroDuration(), [&] {
          extends_at_release = holder.extends;
          release();
        });
      };
    } else {
      extends_at_release = holder.extends;
      release();
    }
    ASSERT_TRUE(uv_.RunUntil([&] { return released.has_value(); }, kWaitLimit));
    EXPECT_THAT(*released, IsOk());
    EXPECT_EQ(Server(0, {"EXISTS", keys_.LockKey(resource)}), Reply::Integer(0));

    // From now on nothing is sent for this lease: ten renew intervals.
    ASSERT_EQ(Server(0, {"CONFIG", "RESETSTAT"}), Reply::Status("OK"));
    uv_.RunFor(absl::Seconds(1));
    EXPECT_EQ(holder.extends, extends_at_release) << "the watchdog renewed after unlock";
    EXPECT_EQ(CommandCalls(0, "evalsha"), 0) << "a script call reached the server";
    EXPECT_EQ(CommandCalls(0, "eval"), 0) << "a script call reached the server";
    EXPECT_EQ(Server(0, {"EXISTS", keys_.LockKey(resource)}), Reply::Integer(0));
    EXPECT_FALSE(lost) << why;
    EXPECT_FALSE(watch.active());
    EXPECT_FALSE(watch.IsValid());
  }
}

// ShedLock#2583: A's lease expired, B took the lock, and A's late unlock
// deleted B's key (or A's extend prolonged it). Here A's Release and Extend
// after expiry are refused with kFailedPrecondition and B's key keeps B's
// owner and B's TTL; B can still extend and release its lease.
TEST_F(PeerBugsRealTest, ShedLock2583_UnlockOrExtendAfterExpiryNeverTouchesTheNextHolder) {
  StartServers(1);
  SimpleLock simple_a(loop_.get(), Client()), simple_b(loop_.get(), Client());
  ReentrantLock reentrant_a(loop_.get(), Client()), reentrant_b(loop_.get(), Client());
  struct Case {
    const char* name;
    Lock* a;
    Lock* b;
  };
  for (const Case& c : {Case{"simple", &simple_a, &simple_b},
                        Case{"reentrant", &reentrant_a, &reentrant_b}}) {
    SCOPED_TRACE(c.name);
    const std::string resource = absl::StrCat("report-", c.name);
    const std::string key = keys_.LockKey(resource);
    absl::StatusOr<Lease> a = AcquireNow(*c.a, resource, absl::Milliseconds(100));
    ASSERT_THAT(a, IsOk());
    uv_.RunFor(absl::Milliseconds(300));  // A's lease runs out
    ASSERT_EQ(Server(0, {"EXISTS", key}), Reply::Integer(0)) << "A's key did not expire";
    const absl::Duration b_ttl = absl::Seconds(10);
    absl::StatusOr<Lease> b = AcquireNow(*c.b, resource, b_ttl);
    ASSERT_THAT(b, IsOk());
    const Reply b_value = Server(0, {"DUMP", key});

    EXPECT_THAT(ReleaseNow(*c.a, *a), StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(ExtendNow(*c.a, *a, absl::Seconds(60)),
                StatusIs(absl::StatusCode::kFailedPrecondition));

    // B's key: the same value, B's TTL (not A's 60 s).
    EXPECT_EQ(Server(0, {"DUMP", key}), b_value);
    const Reply pttl = Server(0, {"PTTL", key});
    ASSERT_TRUE(pttl.is_integer());
    EXPECT_GT(pttl.integer, 0);
    EXPECT_LE(pttl.integer, absl::ToInt64Milliseconds(b_ttl));
    absl::StatusOr<Lease> b2 = ExtendNow(*c.b, *b, b_ttl);
    EXPECT_THAT(b2, IsOk());
    EXPECT_THAT(ReleaseNow(*c.b, b2.ok() ? *b2 : *b), IsOk());
    EXPECT_EQ(Server(0, {"EXISTS", key}), Reply::Integer(0));
  }
}

// redlock-rb#3: a SET that timed out on the client but succeeded on the
// server was never released. Here the server holds every client's commands
// (CLIENT PAUSE ALL) past the lock's command timeout: the acquire fails
// with kDeadlineExceeded, the server grants it when the pause ends (the
// fence counter shows it ran), and the lock releases the token it sent:
// the key is gone long before its TTL, and a new acquire succeeds.
TEST_F(PeerBugsRealTest, RedlockRb3_SetThatTimedOutButSucceededIsReleased) {
  StartServers(1);
  SimpleLockOptions o;
  o.command_timeout = absl::Milliseconds(200);
  SimpleLock lock(loop_.get(), Client(), o);
  // The scripts are cached on the server first, so the probe is about the
  // timeout alone (script loading order is another test's subject).
  absl::StatusOr<Lease> warm = AcquireNow(lock, "warm-up", absl::Seconds(5));
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(ReleaseNow(lock, *warm), IsOk());

  const std::string key = keys_.LockKey("job");
  // The server's fence mark (one per server) after the warm-up's fence.
  const std::string mark = keys_.FenceHwmKey();
  ASSERT_EQ(Server(0, {"GET", mark}), Reply::String(absl::StrCat(warm->fence)));
  ASSERT_EQ(Server(0, {"CLIENT", "PAUSE", "1000", "ALL"}), Reply::Status("OK"));
  absl::StatusOr<Lease> timed_out = AcquireNow(lock, "job", absl::Seconds(60));
  EXPECT_THAT(timed_out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  // After the pause: the acquire ran (the mark moved on by one fence) and
  // its key was released.
  const Reply ran = Reply::String(absl::StrCat(warm->fence + 1));
  EXPECT_TRUE(uv_.RunUntil(
      [&] {
        return Server(0, {"GET", mark}) == ran && Server(0, {"EXISTS", key}) == Reply::Integer(0);
      },
      kWaitLimit))
      << "fence mark " << Server(0, {"GET", mark}).DebugString() << ", PTTL "
      << Server(0, {"PTTL", key}).DebugString();
  SimpleLock other(loop_.get(), Client());
  absl::StatusOr<Lease> next = AcquireNow(other, "job", absl::Seconds(5));
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->fence, warm->fence + 2);
}

// redlock-rb#3 over RedLock: every server holds its commands past the
// server timeout, so the attempt fails; each server's grant, applied when
// its pause ends, is released again.
TEST_F(PeerBugsRealTest, RedlockRb3_RedLockAttemptThatTimedOutEverywhereIsReleasedEverywhere) {
  StartServers(3);
  std::vector<Transport*> raw;
  for (int i = 0; i < 3; ++i) raw.push_back(Client(i));
  RedLockOptions o;
  o.server_timeout = absl::Milliseconds(200);
  o.retry_count = 0;
  absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(loop_.get(), raw, o);
  ASSERT_THAT(lock, IsOk());
  absl::StatusOr<Lease> warm = AcquireNow(**lock, "warm-up", absl::Seconds(5));
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(ReleaseNow(**lock, *warm), IsOk());

  const std::string key = keys_.LockKey("job");
  // Each server's fence mark before the attempt (the warm-up's fence).
  const std::string mark = keys_.FenceHwmKey();
  std::vector<Reply> ran;
  for (int i = 0; i < 3; ++i) {
    const Reply before = Server(i, {"GET", mark});
    int64_t m = 0;
    ASSERT_TRUE(before.is_string() && absl::SimpleAtoi(before.str, &m)) << before.DebugString();
    ran.push_back(Reply::String(absl::StrCat(m + 1)));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Server(i, {"CLIENT", "PAUSE", "1000", "ALL"}), Reply::Status("OK"));
  }
  absl::StatusOr<Lease> failed = AcquireNow(**lock, "job", absl::Seconds(30));
  EXPECT_FALSE(failed.ok());
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(absl::StrCat("server ", i));
    EXPECT_TRUE(uv_.RunUntil(
        [&] {
          return Server(i, {"GET", mark}) == ran[i] &&
                 Server(i, {"EXISTS", key}) == Reply::Integer(0);
        },
        kWaitLimit))
        << "fence mark " << Server(i, {"GET", mark}).DebugString() << ", PTTL "
        << Server(i, {"PTTL", key}).DebugString();
  }
  EXPECT_THAT(AcquireNow(**lock, "job", absl::Seconds(5)), IsOk());
}

// Records RedLock's per-attempt timing: when the last retry was scheduled,
// and when each granting acquire vote of the attempt after it was sent
// (reply time - latency).
class AttemptRecorder : public LockObserver {
 public:
  explicit AttemptRecorder(EventLoop* loop) : loop_(loop) {}
  void OnAcquireWait(const AcquireWaitEvent&) override {
    last_wait = loop_->Now();
    ++waits;
    grant_sends.clear();  // a new attempt follows
  }
  void OnServerVote(const ServerVoteEvent& e) override {
    if (e.operation != "acquire" || !e.status.ok()) return;
    // A failed attempt's grant may come in after the retry was scheduled
    // (the attempt was decided by the others' refusals): it was sent before.
    const absl::Time sent = loop_->Now() - e.latency;
    if (sent >= last_wait) grant_sends.push_back(sent);
  }
  absl::Time last_wait = absl::InfinitePast();
  int waits = 0;
  std::vector<absl::Time> grant_sends;

 private:
  EventLoop* loop_;
};

// node-redlock#169: with retries, validity was counted from the first
// attempt's start, so a lock won after a few retries was reported with
// less (or no) validity left. Here a rival holds the resource on every
// server for longer than our TTL; we win on a later attempt, and the lease
// deadline counts from the winning attempt's first send:
//   after the last retry was scheduled + ttl - drift  <=  deadline
//   deadline  <=  the winning votes' sends + ttl - drift.
TEST_F(PeerBugsRealTest, NodeRedlock169_ValidityCountsFromTheWinningAttemptsFirstSend) {
  StartServers(3);
  std::vector<Transport*> raw;
  for (int i = 0; i < 3; ++i) raw.push_back(Client(i));
  AttemptRecorder recorder(loop_.get());
  RedLockOptions o;
  o.server_timeout = absl::Milliseconds(200);
  o.retry_count = 50;
  o.retry_delay = absl::Milliseconds(50);
  o.retry_jitter = absl::ZeroDuration();
  o.observer = &recorder;
  absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(loop_.get(), raw, o);
  ASSERT_THAT(lock, IsOk());
  const absl::Duration ttl = absl::Milliseconds(500);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Server(i, {"SET", keys_.LockKey("job"), "rival", "PX", "1200"}),
              Reply::Status("OK"));
  }
  const absl::Time call = loop_->Now();
  absl::StatusOr<Lease> lease = AcquireNow(**lock, "job", ttl);
  const absl::Time answered = loop_->Now();
  ASSERT_THAT(lease, IsOk());
  ASSERT_GE(recorder.waits, 1) << "won at once: the rival's hold did not make it retry";
  // The retries outlasted our TTL: validity counted from the call would
  // have run out.
  EXPECT_GT(answered - call, ttl);
  const absl::Duration drift = DriftAllowance(ttl, o.drift_factor, kDefaultDriftConstant);
  ASSERT_GE(recorder.grant_sends.size(), 2u);
  const absl::Time first_grant_send =
      *std::min_element(recorder.grant_sends.begin(), recorder.grant_sends.end());
  EXPECT_LE(lease->deadline, first_grant_send + ttl - drift);
  EXPECT_GE(lease->deadline, recorder.last_wait + ttl - drift);
  EXPECT_GT(lease->deadline, answered);
}

}  // namespace
}  // namespace dlock
