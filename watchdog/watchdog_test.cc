// Watchdog logic against `ScriptedLock`, a Lock over a tiny in-test server
// model whose every reply (latency, failure, loss) the test controls, on a
// ManualEventLoop. The end-to-end tests over FakeRedis are in
// watchdog_fake_test.cc.
#include "dlock/watchdog/watchdog.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/stallable_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::IsEmpty;
using ::dlock::test_support::StallableLoop;

// A Lock over an in-test model of one server: keys with owner tokens and
// expiry on the server's clock (the inner ManualEventLoop: a stall of the
// client's loop does not move it). Each command executes on the "server" after
// `latency` and answers at once; faults: queued failures, partition (commands
// neither execute nor answer until Heal()), synchronous rejection.
class ScriptedLock : public Lock {
 public:
  struct Op {
    std::string name;  // "extend" or "release"
    std::string resource;
    absl::Time sent;
  };

  ScriptedLock(EventLoop* loop, const EventLoop* server_clock)
      : loop_(loop), server_clock_(server_clock) {}

  // Puts `resource` on the server as ours and returns the lease, as a
  // successful acquire sent now would.
  // `token`: the owner token to grant (empty: "token-N").
  Lease Grant(const std::string& resource, absl::Duration ttl,
              const std::string& token = "") {
    Lease lease;
    lease.resource = resource;
    ++tokens_;
    lease.token = token.empty() ? absl::StrCat("token-", tokens_) : token;
    lease.fence = tokens_;
    lease.ttl = ttl;
    lease.deadline = loop_->Now() + ttl - drift;
    keys_[resource] = Key{lease.token, ServerNow() + ttl};
    return lease;
  }
  // Another owner takes the key (as after eviction and a new acquire).
  void Steal(const std::string& resource) {
    keys_[resource] = Key{"thief", ServerNow() + absl::Hours(1)};
  }
  bool HeldBy(const std::string& resource, const std::string& token) const {
    auto it = keys_.find(resource);
    return it != keys_.end() && it->second.token == token &&
           it->second.expires > ServerNow();
  }

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view, const AcquireOptions&,
                                        LeaseCallback) override {
    return absl::UnimplementedError("ScriptedLock has no Acquire; use Grant");
  }

  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    log.push_back({"release", lease.resource, loop_->Now()});
    Send([this, lease, callback = std::move(callback)]() mutable {
      auto it = keys_.find(lease.resource);
      if (it == keys_.end() || it->second.token != lease.token ||
          it->second.expires <= ServerNow()) {
        std::move(callback)(absl::FailedPreconditionError("not owner"));
        return;
      }
      keys_.erase(it);
      std::move(callback)(absl::OkStatus());
    });
    return absl::OkStatus();
  }

  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    if (!reject_next.ok()) {
      absl::Status s = reject_next;
      reject_next = absl::OkStatus();
      return s;
    }
    const absl::Time sent = loop_->Now();
    log.push_back({"extend", lease.resource, sent});
    absl::Status fail;
    if (!fail_next.empty()) {
      fail = fail_next.front();
      fail_next.pop_front();
    }
    Send([this, lease, ttl, sent, fail, callback = std::move(callback)]() mutable {
      if (!fail.ok()) {
        std::move(callback)(fail);
        return;
      }
      auto it = keys_.find(lease.resource);
      if (it == keys_.end() || it->second.token != lease.token ||
          it->second.expires <= ServerNow()) {
        std::move(callback)(absl::FailedPreconditionError("not owner"));
        return;
      }
      it->second.expires = ServerNow() + ttl;
      Lease renewed = lease;
      renewed.ttl = ttl;
      renewed.deadline = sent + ttl - drift;
      std::move(callback)(renewed);
    });
    return absl::OkStatus();
  }

  // Commands sent while partitioned wait (unexecuted) until Heal().
  void Partition() { partitioned_ = true; }
  void Heal() {
    partitioned_ = false;
    auto held = std::move(held_);
    held_.clear();
    for (auto& fn : held) {
      loop_->RunAfter(latency, std::move(fn));
    }
  }

  absl::Time ServerExpiry(const std::string& resource) const {
    auto it = keys_.find(resource);
    return it == keys_.end() ? absl::InfinitePast() : it->second.expires;
  }

  int Count(const std::string& name) const {
    int n = 0;
    for (const Op& op : log) n += op.name == name;
    return n;
  }

  absl::Duration latency = absl::Milliseconds(1);
  absl::Duration drift = absl::Milliseconds(3);
  std::deque<absl::Status> fail_next;  // answered without executing
  absl::Status reject_next;            // returned by the next Extend call
  std::vector<Op> log;

 private:
  struct Key {
    std::string token;
    absl::Time expires;
  };

  absl::Time ServerNow() const { return server_clock_->Now(); }

  void Send(absl::AnyInvocable<void() &&> fn) {
    if (partitioned_) {
      held_.push_back(std::move(fn));
      return;
    }
    loop_->RunAfter(latency, std::move(fn));
  }

  EventLoop* loop_;
  const EventLoop* server_clock_;
  int tokens_ = 0;
  bool partitioned_ = false;
  std::map<std::string, Key> keys_;
  std::vector<absl::AnyInvocable<void() &&>> held_;
};

class RecordingObserver : public LockObserver {
 public:
  void OnRenewal(const RenewalEvent& e) override { renewals.push_back(e.status); margins.push_back(e.margin); }
  void OnLeaseLost(const LeaseLostEvent& e) override { lost.push_back(e.status); }
  std::vector<absl::Status> renewals;
  std::vector<absl::Duration> margins;
  std::vector<absl::Status> lost;
};

struct LostRecord {
  bool fired = false;
  absl::Status status;
  absl::Time at;
};

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest()
      : loop_(), lock_(&loop_, &loop_.inner()), watchdog_(&loop_, &lock_, Options()) {}

  WatchdogOptions Options() {
    WatchdogOptions options;
    options.observer = &observer_;
    return options;
  }

  WatchOptions OnLost(LostRecord* record) {
    WatchOptions options;
    options.on_lost = [this, record](absl::Status s) {
      EXPECT_FALSE(record->fired) << "on_lost ran twice";
      record->fired = true;
      record->status = std::move(s);
      record->at = loop_.Now();
    };
    return options;
  }

  void Advance(absl::Duration d) { loop_.inner().AdvanceTime(d); }

  StallableLoop loop_;
  ScriptedLock lock_;
  RecordingObserver observer_;
  Watchdog watchdog_;
};

TEST_F(WatchdogTest, RenewsEveryThirdOfTheTtlForTenTtls) {
  const absl::Duration ttl = absl::Seconds(3);
  Lease lease = lock_.Grant("r", ttl);
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  for (int i = 0; i < 100; ++i) {  // 10 TTLs
    Advance(ttl / 10);
    ASSERT_TRUE(lock_.HeldBy("r", lease.token)) << "at step " << i;
    ASSERT_TRUE(watch->IsValid());
    ASSERT_GT(watch->lease().deadline, loop_.Now());
  }
  EXPECT_FALSE(lost.fired);
  EXPECT_TRUE(watch->active());
  // 30 s of 1 s renewals.
  EXPECT_GE(lock_.Count("extend"), 29);
  EXPECT_LE(lock_.Count("extend"), 31);
  for (size_t i = 1; i < lock_.log.size(); ++i) {
    EXPECT_LE(lock_.log[i].sent - lock_.log[i - 1].sent, ttl / 3);
  }
  EXPECT_EQ(watchdog_.watched(), 1u);
}

TEST_F(WatchdogTest, HonoursAConfiguredRenewInterval) {
  Lease lease = lock_.Grant("r", absl::Seconds(10));
  WatchOptions options;
  options.renew_interval = absl::Seconds(1);
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, std::move(options));
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Milliseconds(10500));
  EXPECT_EQ(lock_.Count("extend"), 10);
}

TEST_F(WatchdogTest, LeaseAccessorReturnsTheLatestRenewedLease) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, {});
  ASSERT_THAT(watch, IsOk());
  EXPECT_EQ(watch->lease().deadline, lease.deadline);
  Advance(absl::Seconds(1) + absl::Milliseconds(1));  // renewal sent at 1 s - drift
  EXPECT_GT(watch->lease().deadline, lease.deadline);
  EXPECT_EQ(watch->lease().token, lease.token);
  EXPECT_EQ(watch->lease().deadline,
            lock_.log.back().sent + absl::Seconds(3) - lock_.drift);
}

// The watch keeps the lease packed (a 32-digit lower-case hex token as 16
// bytes, any other token as it is, the resource beside it): every token
// must come back exactly, in lease(), in each Extend (the model server
// refuses a wrong token) and in the Release.
TEST_F(WatchdogTest, EveryTokenAndResourceComeBackExactly) {
  const std::string tokens[] = {
      "0123456789abcdef0fedcba987654321",   // packed
      "0123456789ABCDEF0FEDCBA987654321",   // upper case: kept as it is
      "0123456789abcdef0fedcba98765432",    // 31 digits
      "0123456789abcdef0fedcba9876543210",  // 33 digits
      "0123456789abcdef0fedcba98765432g",   // not hex
      std::string("owner\0id", 8),          // reentrant owner ids, any bytes
  };
  int n = 0;
  for (const std::string& token : tokens) {
    SCOPED_TRACE(token);
    const std::string resource = absl::StrCat("res/", std::string(n, 'x'), n);
    ++n;
    Lease lease = lock_.Grant(resource, absl::Seconds(3), token);
    absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, {});
    ASSERT_THAT(watch, IsOk());
    EXPECT_EQ(watch->lease().token, token);
    EXPECT_EQ(watch->lease().resource, resource);
    EXPECT_EQ(watch->lease().fence, lease.fence);
    EXPECT_EQ(watch->lease().ttl, lease.ttl);
    Advance(absl::Seconds(2));  // renewed twice: the server took the token
    EXPECT_TRUE(watch->active());
    EXPECT_GT(watch->lease().deadline, lease.deadline);
    EXPECT_EQ(watch->lease().token, token);
    absl::Status released = absl::UnknownError("not called");
    ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
    Advance(absl::Milliseconds(100));
    EXPECT_THAT(released, IsOk());
    EXPECT_FALSE(lock_.HeldBy(resource, token));
  }
}

TEST_F(WatchdogTest, RefusedRenewalCallsOnLostAtOnceWithFailedPrecondition) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Milliseconds(500));
  lock_.Steal("r");
  Advance(absl::Milliseconds(600));  // the renewal at ~1 s is refused
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(lost.at, lock_.log.back().sent + lock_.latency);
  EXPECT_FALSE(watch->active());
  EXPECT_FALSE(watch->IsValid());
  EXPECT_TRUE(watch->lost());
  EXPECT_EQ(watchdog_.watched(), 0u);
  // Stopped for good: nothing more is sent.
  const int extends = lock_.Count("extend");
  Advance(absl::Seconds(30));
  EXPECT_EQ(lock_.Count("extend"), extends);
  ASSERT_EQ(observer_.lost.size(), 1u);
  EXPECT_THAT(observer_.lost[0], StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(WatchdogTest, TransientFailuresAreRetriedWithinTheValidity) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.fail_next = {absl::UnavailableError("down"),
                     absl::DeadlineExceededError("slow"),
                     absl::UnavailableError("down")};
  Advance(absl::Seconds(30));
  EXPECT_FALSE(lost.fired);
  EXPECT_TRUE(watch->IsValid());
  EXPECT_TRUE(lock_.HeldBy("r", lease.token));
  EXPECT_EQ(std::count_if(observer_.renewals.begin(), observer_.renewals.end(),
                          [](const absl::Status& s) { return !s.ok(); }),
            3);
}

TEST_F(WatchdogTest, NoAnswerDeclaresLostAtTheLocalDeadlineBeforeServerExpiry) {
  const absl::Duration ttl = absl::Seconds(3);
  const absl::Time acquired_at = loop_.Now();
  Lease lease = lock_.Grant("r", ttl);
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.Partition();
  Advance(absl::Seconds(10));
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(lost.at, lease.deadline);
  EXPECT_LT(lost.at, acquired_at + ttl);
  EXPECT_LT(lost.at, lock_.ServerExpiry("r"));  // no stall: clocks agree
  // It kept trying meanwhile (the first try plus retries).
  EXPECT_GE(lock_.Count("extend"), 3);
}

TEST_F(WatchdogTest, ExtendRejectedByTheCallIsRetriedWhenTransient) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.reject_next = absl::UnavailableError("not connected");
  Advance(absl::Seconds(10));
  EXPECT_FALSE(lost.fired);
  EXPECT_TRUE(lock_.HeldBy("r", lease.token));
}

TEST_F(WatchdogTest, ExtendRejectedByTheCallWithACancelIsLost) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.reject_next = absl::CancelledError("lock shut down");
  Advance(absl::Seconds(1));
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(WatchdogTest, LateSuccessfulRenewalDoesNotResurrectAndIsReleased) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.Partition();
  Advance(absl::Seconds(2));
  // The server did not expire the key yet (its clock is not ours), but our
  // local deadline passes first.
  Advance(lease.deadline - loop_.Now());
  ASSERT_TRUE(lost.fired);
  EXPECT_TRUE(lock_.HeldBy("r", lease.token));
  lock_.Heal();  // the held extends now execute and succeed
  Advance(absl::Milliseconds(10));
  EXPECT_TRUE(watch->lost());
  EXPECT_FALSE(watch->IsValid());
  EXPECT_EQ(watch->lease().deadline, lease.deadline);
  // The key the late extends renewed was given back.
  EXPECT_FALSE(lock_.HeldBy("r", lease.token));
  EXPECT_GE(lock_.Count("release"), 1);
  EXPECT_EQ(observer_.lost.size(), 1u);
}

TEST_F(WatchdogTest, StalledLoopIsDeclaredLostInsteadOfRenewed) {
  const absl::Duration ttl = absl::Seconds(3);
  Lease lease = lock_.Grant("r", ttl);
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Milliseconds(900));  // before the first renewal
  const int extends = lock_.Count("extend");
  // The loop is blocked for 5 s (the model server's clock does not move, so a
  // renewal now would succeed: it must not paper over the gap).
  loop_.Stall(absl::Seconds(5));
  Advance(absl::Milliseconds(200));  // the overdue timers fire, late
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(lock_.Count("extend"), extends);
  EXPECT_FALSE(watch->IsValid());
}

TEST_F(WatchdogTest, RenewalAnsweredAfterAStallPastTheDeadlineIsLost) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.latency = absl::Milliseconds(100);
  Advance(absl::Seconds(1) - lock_.drift);  // renewal sent now
  ASSERT_EQ(lock_.Count("extend"), 1);
  loop_.Stall(absl::Seconds(4));  // its reply is handled after the deadline
  Advance(absl::Milliseconds(100));
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(watch->IsValid());
  // Not adopted, and given back.
  EXPECT_EQ(watch->lease().deadline, lease.deadline);
  Advance(absl::Seconds(1));
  EXPECT_FALSE(lock_.HeldBy("r", lease.token));
}

TEST_F(WatchdogTest, StopEndsRenewalAtOnceAndIgnoresTheReplyInFlight) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.latency = absl::Milliseconds(50);
  Advance(absl::Seconds(1));  // renewal sent, not answered yet
  ASSERT_EQ(lock_.Count("extend"), 1);
  watch->Stop();
  EXPECT_FALSE(watch->active());
  EXPECT_TRUE(watch->IsValid());  // not released: valid until its deadline
  Advance(absl::Seconds(30));
  EXPECT_EQ(lock_.Count("extend"), 1);
  EXPECT_EQ(watch->lease().deadline, lease.deadline);  // reply not adopted
  EXPECT_FALSE(watch->IsValid());
  EXPECT_FALSE(lost.fired);
  EXPECT_EQ(loop_.inner().pending(), 0u);
}

TEST_F(WatchdogTest, DestroyingTheHandleStopsRenewal) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  {
    absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, {});
    ASSERT_THAT(watch, IsOk());
    Advance(absl::Seconds(2));
  }
  const int extends = lock_.Count("extend");
  EXPECT_EQ(watchdog_.watched(), 0u);
  Advance(absl::Seconds(30));
  EXPECT_EQ(lock_.Count("extend"), extends);
}

TEST_F(WatchdogTest, ReleaseStopsRenewalBeforeReleasingAndNothingRenewsAfter) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.latency = absl::Milliseconds(50);
  Advance(absl::Seconds(1));  // an extend is in flight
  absl::Status released = absl::UnknownError("not called");
  ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
  EXPECT_FALSE(watch->IsValid());
  Advance(absl::Seconds(30));
  EXPECT_THAT(released, IsOk());
  EXPECT_FALSE(lock_.HeldBy("r", lease.token));
  // No extend after the release in the command log.
  ASSERT_FALSE(lock_.log.empty());
  EXPECT_EQ(lock_.log.back().name, "release");
  EXPECT_EQ(lock_.Count("release"), 1);
  EXPECT_FALSE(lost.fired);
  EXPECT_THAT(watch->Release([](absl::Status) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(WatchdogTest, ReleaseAfterLostStillGivesTheKeyBack) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.reject_next = absl::CancelledError("x");
  Advance(absl::Seconds(1));
  ASSERT_TRUE(lost.fired);
  absl::Status released = absl::UnknownError("not called");
  ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
  Advance(absl::Seconds(1));
  EXPECT_THAT(released, IsOk());
}

TEST_F(WatchdogTest, WatchRejectsBadArguments) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  Lease bad = lease;
  bad.resource.clear();
  EXPECT_THAT(watchdog_.Watch(bad, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = lease;
  bad.token.clear();
  EXPECT_THAT(watchdog_.Watch(bad, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = lease;
  bad.ttl = absl::ZeroDuration();
  EXPECT_THAT(watchdog_.Watch(bad, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  WatchOptions options;
  options.renew_interval = absl::Seconds(3);
  EXPECT_THAT(watchdog_.Watch(lease, std::move(options)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options = {};
  options.retry_interval = -absl::Seconds(1);
  EXPECT_THAT(watchdog_.Watch(lease, std::move(options)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Advance(absl::Seconds(3));
  EXPECT_THAT(watchdog_.Watch(lease, {}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(watchdog_.watched(), 0u);
  EXPECT_EQ(lock_.Count("extend"), 0);
}

TEST_F(WatchdogTest, EmptyHandleIsInertAndReleaseFails) {
  WatchHandle handle;
  EXPECT_FALSE(handle.active());
  EXPECT_FALSE(handle.IsValid());
  handle.Stop();
  EXPECT_THAT(handle.Release([](absl::Status) {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(WatchdogTest, MovedHandleKeepsTheWatch) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, {});
  ASSERT_THAT(watch, IsOk());
  WatchHandle moved = *std::move(watch);
  EXPECT_TRUE(moved.active());
  WatchHandle assigned;
  assigned = std::move(moved);
  Advance(absl::Seconds(10));
  EXPECT_TRUE(assigned.IsValid());
  EXPECT_TRUE(lock_.HeldBy("r", lease.token));
}

TEST_F(WatchdogTest, OnLostMayDestroyTheWatchdog) {
  auto watchdog = std::make_unique<Watchdog>(&loop_, &lock_);
  std::vector<WatchHandle> handles;
  int lost = 0;
  for (int i = 0; i < 3; ++i) {
    WatchOptions options;
    options.on_lost = [&](absl::Status) {
      ++lost;
      watchdog.reset();
    };
    absl::StatusOr<WatchHandle> h =
        watchdog->Watch(lock_.Grant(absl::StrCat("r", i), absl::Seconds(3)),
                        std::move(options));
    ASSERT_THAT(h, IsOk());
    handles.push_back(*std::move(h));
  }
  lock_.Partition();
  Advance(absl::Seconds(10));
  EXPECT_EQ(lost, 1);  // the others ended with the watchdog, silently
  EXPECT_EQ(watchdog, nullptr);
  for (WatchHandle& h : handles) {
    EXPECT_FALSE(h.active());
    EXPECT_FALSE(h.IsValid());
  }
  EXPECT_THAT(handles[1].Release([](absl::Status) {}),
              StatusIs(absl::StatusCode::kCancelled));
  lock_.Heal();
  Advance(absl::Seconds(1));  // late replies find no watchdog: harmless
}

TEST_F(WatchdogTest, DestroyingTheWatchdogEndsWatchesWithoutOnLost) {
  auto watchdog = std::make_unique<Watchdog>(&loop_, &lock_);
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  LostRecord lost;
  absl::StatusOr<WatchHandle> watch = watchdog->Watch(lease, OnLost(&lost));
  ASSERT_THAT(watch, IsOk());
  lock_.latency = absl::Milliseconds(50);
  Advance(absl::Seconds(1));  // extend in flight
  watchdog.reset();
  EXPECT_EQ(loop_.inner().pending(), 1u);  // only the extend's reply
  Advance(absl::Seconds(30));
  EXPECT_FALSE(lost.fired);
  EXPECT_FALSE(watch->active());
  EXPECT_EQ(lock_.Count("extend"), 1);
}

TEST_F(WatchdogTest, AllWatchesShareOneLoopTimerAndDueRenewalsGoOutTogether) {
  std::vector<WatchHandle> handles;
  for (int i = 0; i < 1000; ++i) {
    // Acquired 1 ms apart: renewals due within the 5 ms batch window are
    // sent in one loop turn.
    absl::StatusOr<WatchHandle> h =
        watchdog_.Watch(lock_.Grant(absl::StrCat("r", i), absl::Seconds(3)), {});
    ASSERT_THAT(h, IsOk());
    handles.push_back(*std::move(h));
    if (i % 10 == 9) Advance(absl::Milliseconds(1));
  }
  EXPECT_EQ(loop_.inner().pending(), 1u);
  Advance(absl::Milliseconds(1500));  // the first renewal of each, only
  std::map<absl::Time, int> per_turn;
  for (const auto& op : lock_.log) per_turn[op.sent]++;
  EXPECT_EQ(lock_.Count("extend"), 1000);
  // 100 ms of acquisitions -> about 100 / (5 + 1) turns, not 1000.
  EXPECT_LE(per_turn.size(), 20u);
  for (const WatchHandle& h : handles) EXPECT_TRUE(h.IsValid());
}

TEST_F(WatchdogTest, ObserverSeesRenewalsWithTheirMargin) {
  Lease lease = lock_.Grant("r", absl::Seconds(3));
  absl::StatusOr<WatchHandle> watch = watchdog_.Watch(lease, {});
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Seconds(5));
  ASSERT_GE(observer_.renewals.size(), 4u);
  for (const absl::Status& s : observer_.renewals) EXPECT_THAT(s, IsOk());
  for (absl::Duration m : observer_.margins) {
    EXPECT_GT(m, absl::Seconds(1));
    EXPECT_LE(m, absl::Seconds(3));
  }
  EXPECT_THAT(observer_.lost, IsEmpty());
}

}  // namespace
}  // namespace dlock
