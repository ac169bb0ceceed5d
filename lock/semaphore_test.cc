// Semaphore on FakeRedis in virtual time: exact expiry of a crashed holder's
// permit, the watchdog renewing permits, cancel and unknown outcomes leaving
// no permit behind, the restart rule and fences, and a randomized run that
// checks "never more than N valid permits" at every step. The behaviour
// suite (semaphore_behavior_suite.h) runs on the fake and on a real server.
#include "dlock/lock/semaphore.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/acquire_result.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StartAcquire;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

AcquireOptions Ttl(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

SemaphoreOptions Permits(int64_t n) {
  SemaphoreOptions o;
  o.permits = n;
  return o;
}

class SemaphoreTest : public ::testing::Test {
 protected:
  SemaphoreTest() : server_(&loop_) {
    for (const NamedScript& s : SemaphoreScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    server_.Execute(TrustDataSetCommand(KeyScheme{}));
  }

  FakeTransport* NewClient() {
    clients_.push_back(std::make_unique<FakeTransport>(&loop_, &server_));
    clients_.back()->SetLatency(absl::Milliseconds(1));
    return clients_.back().get();
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, absl::string_view resource,
                                   AcquireOptions options) {
    auto out = StartAcquire(lock, resource, options);
    loop_.AdvanceTime(absl::Milliseconds(2));
    return *out;
  }

  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    absl::Status out = absl::UnknownError("pending");
    absl::Status s = lock.Release(lease, [&](absl::Status r) { out = std::move(r); });
    if (!s.ok()) return s;
    loop_.AdvanceTime(absl::Milliseconds(2));
    return out;
  }

  int64_t Holders(absl::string_view resource) {
    return server_.Execute({"ZCARD", keys_.LockKey(resource)}).integer;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  KeyScheme keys_;
  std::vector<std::unique_ptr<FakeTransport>> clients_;
};

TEST_F(SemaphoreTest, CrashedHoldersPermitReturnsExactlyWhenItsTtlHasPassed) {
  Semaphore crashed(&loop_, NewClient(), Permits(1));
  Semaphore other(&loop_, NewClient(), Permits(1));
  // Sent at t0, executed at t0 + 0.5 ms: the server expiry is t0 + 1000.5.
  ASSERT_THAT(AcquireNow(crashed, "r", Ttl(absl::Seconds(1))), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(996));  // t0 + 998: runs at t0 + 998.5
  EXPECT_THAT(AcquireNow(other, "r", Ttl(absl::Seconds(1))),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("all 1 permits are held")));
  // Runs at t0 + 1000.5 (ms resolution: the permit is expired at its score).
  EXPECT_THAT(AcquireNow(other, "r", Ttl(absl::Seconds(1))), IsOk());
}

TEST_F(SemaphoreTest, WatchdogRenewsAPermitForManyTtlsThenReleasesIt) {
  Semaphore sem(&loop_, NewClient(), Permits(1));
  Semaphore other(&loop_, NewClient(), Permits(1));
  Watchdog watchdog(&loop_, &sem);
  absl::StatusOr<Lease> permit = AcquireNow(sem, "r", Ttl(absl::Milliseconds(300)));
  ASSERT_THAT(permit, IsOk());
  bool lost = false;
  WatchOptions wo;
  wo.on_lost = [&](absl::Status) { lost = true; };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*permit, std::move(wo));
  ASSERT_THAT(watch, IsOk());
  for (int i = 0; i < 10; ++i) {
    loop_.AdvanceTime(absl::Milliseconds(300));
    EXPECT_THAT(AcquireNow(other, "r", Ttl(absl::Seconds(1))),
                StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_FALSE(lost);
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(2));
  EXPECT_THAT(released, IsOk());
  EXPECT_THAT(AcquireNow(other, "r", Ttl(absl::Seconds(1))), IsOk());
}

TEST_F(SemaphoreTest, WatchdogReportsAnExpiredPermitAsLost) {
  Semaphore sem(&loop_, NewClient(), Permits(1));
  FakeTransport* conn = NewClient();
  Semaphore renewing(&loop_, conn, Permits(1));
  Watchdog watchdog(&loop_, &renewing);
  absl::StatusOr<Lease> permit = AcquireNow(sem, "r", Ttl(absl::Milliseconds(300)));
  ASSERT_THAT(permit, IsOk());
  absl::Status why;
  bool lost = false;
  WatchOptions wo;
  wo.on_lost = [&](absl::Status s) {
    lost = true;
    why = s;
  };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*permit, std::move(wo));
  ASSERT_THAT(watch, IsOk());
  conn->Partition();  // renewals cannot reach the server
  loop_.AdvanceTime(absl::Milliseconds(400));
  EXPECT_TRUE(lost);
  EXPECT_THAT(why, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(SemaphoreTest, CancelledAcquireThatWonGivesThePermitBack) {
  Semaphore sem(&loop_, NewClient(), Permits(1));
  AcquireHandle h;
  auto out = StartAcquire(sem, "r", Ttl(absl::Seconds(30)), &h);
  EXPECT_TRUE(h.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*out, StatusIs(absl::StatusCode::kUnknown));  // never ran
  EXPECT_EQ(Holders("r"), 0);
  EXPECT_FALSE(h.Cancel());
}

TEST_F(SemaphoreTest, LostReplyLeavesNoPermitBehind) {
  FakeTransport* conn = NewClient();
  SemaphoreOptions o = Permits(1);
  o.command_timeout = absl::Milliseconds(50);
  Semaphore sem(&loop_, conn, o);
  conn->DropNextReplies(1);
  auto out = StartAcquire(sem, "r", Ttl(absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(49));
  EXPECT_EQ(Holders("r"), 1);  // the script ran; its reply is lost
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(Holders("r"), 0);  // the background release gave it back
}

TEST_F(SemaphoreTest, RestartRuleAndFencesFollowTheOtherAcquireScripts) {
  server_.Execute({"DEL", keys_.DataSetKey()});
  SemaphoreOptions o = Permits(2);
  o.restart_window = absl::Seconds(10);
  Semaphore sem(&loop_, NewClient(), o);
  absl::StatusOr<Lease> young = AcquireNow(sem, "r", Ttl(absl::Seconds(1)));
  EXPECT_TRUE(IsYoungDataSet(young.status())) << young.status();
  EXPECT_EQ(Holders("r"), 0);
  const Reply marker = server_.Execute({"GET", keys_.DataSetKey()});
  ASSERT_TRUE(marker.is_string());
  loop_.AdvanceTime(absl::Seconds(10));
  absl::StatusOr<Lease> first = AcquireNow(sem, "r", Ttl(absl::Seconds(1)));
  ASSERT_THAT(first, IsOk());
  // A missing fence mark starts at the server's TIME in us (above the
  // marker x 1000).
  EXPECT_GE(first->fence, (std::stoll(marker.str) + 10000) * 1000 + 1);
  EXPECT_LE(first->fence, server_.NowMs() * 1000 + 1);
  server_.Execute({"SET", keys_.FenceHwmKey(), "9007199254740991"});
  EXPECT_THAT(AcquireNow(sem, "q", Ttl(absl::Seconds(1))),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("exhausted")));
  EXPECT_EQ(Holders("q"), 0);
}

TEST_F(SemaphoreTest, ReleaseWithARefusedPublishStillFreesThePermit) {
  Semaphore sem(&loop_, NewClient(), Permits(1));
  absl::StatusOr<Lease> permit = AcquireNow(sem, "r", Ttl(absl::Seconds(10)));
  ASSERT_THAT(permit, IsOk());
  server_.DenyChannels(true);
  EXPECT_THAT(ReleaseNow(sem, *permit), IsOk());
  EXPECT_EQ(Holders("r"), 0);
}

// Random acquires, releases, renewals and crashes by 6 clients of a
// 3-permit semaphore, some with RetryLock waits, in virtual time: at every
// step no more than 3 permits are valid (granted, not released, local
// deadline not passed), and the server never lists more than 3 holders.
TEST_F(SemaphoreTest, RandomRunNeverHasMoreThanNValidPermits) {
  constexpr int kPermits = 3;
  constexpr int kClients = 6;
  struct Client {
    std::unique_ptr<Semaphore> sem;
    std::unique_ptr<RetryLock> retry;
    std::vector<Lease> held;
    bool busy = false;
  };
  std::vector<Client> clients(kClients);
  for (Client& c : clients) {
    c.sem = std::make_unique<Semaphore>(&loop_, NewClient(), Permits(kPermits));
    RetryLockOptions ro;
    ro.initial_backoff = absl::Milliseconds(5);
    ro.max_backoff = absl::Milliseconds(40);
    c.retry = std::make_unique<RetryLock>(&loop_, c.sem.get(), ro);
  }
  absl::BitGen rng;  // seeded by Abseil; failures print the step
  int64_t granted = 0, max_valid = 0;
  auto valid_now = [&]() {
    int64_t n = 0;
    for (const Client& c : clients) {
      for (const Lease& l : c.held) n += l.deadline > loop_.Now() ? 1 : 0;
    }
    return n;
  };
  for (int step = 0; step < 3000; ++step) {
    Client& c = clients[absl::Uniform(rng, 0, kClients)];
    const int op = absl::Uniform(rng, 0, 10);
    if (op < 4 && !c.busy) {
      c.busy = true;
      const bool wait = absl::Bernoulli(rng, 0.5);
      Lock& lock = wait ? static_cast<Lock&>(*c.retry) : *c.sem;
      ASSERT_THAT(lock.Acquire("r", Ttl(absl::Milliseconds(absl::Uniform(rng, 20, 200)),
                                        wait ? absl::Milliseconds(100) : absl::ZeroDuration()),
                               [&c, &granted](absl::StatusOr<Lease> l) {
                                 c.busy = false;
                                 if (l.ok()) {
                                   c.held.push_back(*l);
                                   ++granted;
                                 }
                               }),
                  IsOk());
    } else if (op < 6 && !c.held.empty()) {
      const Lease l = c.held.back();
      c.held.pop_back();
      ASSERT_THAT(c.sem->Release(l, [](absl::Status) {}), IsOk());
    } else if (op < 7 && !c.held.empty()) {
      const size_t i = absl::Uniform<size_t>(rng, 0, c.held.size());
      ASSERT_THAT(c.sem->Extend(c.held[i], absl::Milliseconds(100),
                                [&c, token = c.held[i].token](absl::StatusOr<Lease> l) {
                                  for (Lease& h : c.held) {
                                    if (l.ok() && h.token == token) h = *l;
                                  }
                                }),
                  IsOk());
    } else if (op < 8 && !c.held.empty()) {
      c.held.clear();  // crash: permits forgotten, never released
    }
    loop_.AdvanceTime(absl::Milliseconds(absl::Uniform(rng, 0, 4)));
    const int64_t valid = valid_now();
    max_valid = std::max(max_valid, valid);
    ASSERT_LE(valid, kPermits) << "step " << step;
    ASSERT_LE(Holders("r"), kPermits) << "step " << step;
  }
  EXPECT_GT(granted, 100);
  EXPECT_EQ(max_valid, kPermits);  // the cap was reached, not just respected
}

}  // namespace
}  // namespace dlock
