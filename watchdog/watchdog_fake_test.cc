// The Watchdog end to end on the in-memory Redis: SimpleLock, ReentrantLock
// and RedLock over FakeTransport connections to FakeRedis servers, all on
// one virtual-time loop (a StallableLoop, so a test can also stall it).
// Faults come from the fake: eviction, partition, latency, restart.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/watchdog/stallable_loop.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StallableLoop;
using ::dlock::test_support::StatusIs;

struct Lost {
  bool fired = false;
  absl::Status status;
  absl::Time at;
  // PTTL of the lock key on the server when on_lost ran (-2: gone).
  int64_t server_pttl = -3;
};

// A lease on "job" kept renewed by a Watchdog of its own; `lost` records
// the on_lost call (see WatchdogFakeTest::AcquireAndWatch).
struct WatchedJob {
  absl::StatusOr<Lease> lease = absl::UnknownError("not acquired");
  std::unique_ptr<Watchdog> watchdog;
  Lost lost;
  absl::StatusOr<WatchHandle> watch = absl::UnknownError("not watched");
};

class WatchdogFakeTest : public ::testing::Test {
 protected:
  WatchdogFakeTest() : server_(&loop_) {}

  FakeTransport* NewClient(FakeRedis* server = nullptr) {
    clients_.push_back(std::make_unique<FakeTransport>(
        &loop_, server != nullptr ? server : &server_));
    clients_.back()->SetLatency(absl::Milliseconds(1));
    return clients_.back().get();
  }

  void Advance(absl::Duration d) { loop_.Advance(d); }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, const std::string& resource,
                                   absl::Duration ttl, std::string task = "") {
    AcquireOptions options;
    options.ttl = ttl;
    options.task_id = std::move(task);
    std::optional<absl::StatusOr<Lease>> result;
    absl::StatusOr<AcquireHandle> h = lock.Acquire(
        resource, options, [&](absl::StatusOr<Lease> r) { result = std::move(r); });
    if (!h.ok()) return h.status();
    for (int i = 0; i < 1000 && !result.has_value(); ++i) {
      Advance(absl::Milliseconds(1));
    }
    if (!result.has_value()) return absl::UnknownError("acquire never answered");
    return *std::move(result);
  }

  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    std::optional<absl::Status> result;
    absl::Status s = lock.Release(lease, [&](absl::Status r) { result = r; });
    if (!s.ok()) return s;
    for (int i = 0; i < 1000 && !result.has_value(); ++i) Advance(absl::Milliseconds(1));
    return result.value_or(absl::UnknownError("release never answered"));
  }

  WatchOptions Record(Lost* lost, const std::string& resource,
                      FakeRedis* server = nullptr) {
    if (server == nullptr) server = &server_;
    WatchOptions options;
    std::string key = keys_.LockKey(resource);
    options.on_lost = [this, lost, server, key](absl::Status s) {
      EXPECT_FALSE(lost->fired);
      lost->fired = true;
      lost->status = std::move(s);
      lost->at = loop_.Now();
      lost->server_pttl = server->PTtl(key);
    };
    return options;
  }

  // Acquires "job" with `ttl` from `holder` and watches it with a Watchdog
  // over `holder`. A failure is fatal: call with ASSERT_NO_FATAL_FAILURE.
  void AcquireAndWatch(SimpleLock& holder, absl::Duration ttl, WatchedJob* job) {
    job->lease = AcquireNow(holder, "job", ttl);
    ASSERT_THAT(job->lease, IsOk());
    job->watchdog = std::make_unique<Watchdog>(&loop_, &holder);
    job->watch = job->watchdog->Watch(*job->lease, Record(&job->lost, "job"));
    ASSERT_THAT(job->watch, IsOk());
  }

  std::optional<std::string> Holder(const std::string& resource) {
    return server_.GetString(keys_.LockKey(resource));
  }

  // Indexes in `t.sent()` of the commands that ran `script`: each run
  // starts with an EVALSHA (an EVAL follows only after NOSCRIPT).
  static std::vector<size_t> ScriptRuns(const FakeTransport& t, const Script& script) {
    std::vector<size_t> at;
    const auto& sent = t.sent();
    for (size_t i = 0; i < sent.size(); ++i) {
      if (sent[i].size() >= 2 && sent[i][0] == "EVALSHA" &&
          sent[i][1] == script.sha1()) {
        at.push_back(i);
      }
    }
    return at;
  }

  StallableLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<FakeTransport>> clients_;
  KeyScheme keys_;
};

TEST_F(WatchdogFakeTest, RenewalKeepsALeaseForTenTtlsAndNobodyElseGetsIt) {
  SimpleLock holder(&loop_, NewClient());
  SimpleLock rival(&loop_, NewClient());
  const absl::Duration ttl = absl::Seconds(3);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job));

  const absl::Time start = loop_.Now();
  while (loop_.Now() < start + 10 * ttl) {
    Advance(absl::Milliseconds(250));
    ASSERT_EQ(Holder("job"), job.lease->token) << loop_.Now() - start;
    ASSERT_TRUE(job.watch->IsValid());
    ASSERT_THAT(AcquireNow(rival, "job", ttl), StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_FALSE(job.lost.fired) << job.lost.status;
  EXPECT_GT(job.watch->lease().deadline, loop_.Now() + ttl / 2);
  // Renewed through Extend only: one extend script per ttl/3, nothing else.
  const FakeTransport& conn = *clients_[0];
  const size_t extends = ScriptRuns(conn, ExtendScript()).size();
  EXPECT_GE(extends, 29u);
  EXPECT_LE(extends, 32u);
  EXPECT_EQ(conn.CountSent("EXEC"), 1);  // the acquire's transaction (docs/fences.md)
  EXPECT_TRUE(ScriptRuns(conn, AcquireScript()).empty());
  EXPECT_TRUE(ScriptRuns(conn, ReleaseScript()).empty());
}

TEST_F(WatchdogFakeTest, RefusedRenewalAfterEvictionAndTakeoverIsLostAtOnce) {
  SimpleLock holder(&loop_, NewClient());
  SimpleLock rival(&loop_, NewClient());
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  Advance(absl::Milliseconds(1500));  // renewed at least once
  ASSERT_FALSE(job.lost.fired);

  ASSERT_TRUE(server_.Evict(keys_.LockKey("job")));
  absl::StatusOr<Lease> taken = AcquireNow(rival, "job", absl::Seconds(30));
  ASSERT_THAT(taken, IsOk());
  const absl::Time taken_at = loop_.Now();
  Advance(absl::Seconds(1));  // the next renewal is refused
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kFailedPrecondition));
  // At once: on the reply of the first renewal after the takeover, well
  // before the local deadline.
  EXPECT_LT(job.lost.at, taken_at + absl::Seconds(1) + absl::Milliseconds(2));
  EXPECT_LT(job.lost.at, job.watch->lease().deadline);
  EXPECT_FALSE(job.watch->IsValid());
  // The new owner is untouched, and nothing more is sent for the old lease.
  const size_t extends = ScriptRuns(*clients_[0], ExtendScript()).size();
  Advance(absl::Seconds(10));
  EXPECT_EQ(Holder("job"), taken->token);
  EXPECT_EQ(ScriptRuns(*clients_[0], ExtendScript()).size(), extends);
}

TEST_F(WatchdogFakeTest, PartitionRightAfterAcquireIsLostBeforeTheKeyCanExpire) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  const absl::Duration ttl = absl::Seconds(3);
  const absl::Time acquire_sent = loop_.Now();
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job));
  conn->Partition();
  Advance(absl::Seconds(10));
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  // The key was set no earlier than the acquire was sent, so it cannot
  // expire before acquire_sent + ttl; on_lost came strictly before, at the
  // local deadline, with the key still alive on the server.
  EXPECT_LT(job.lost.at, acquire_sent + ttl);
  EXPECT_EQ(job.lost.at, job.lease->deadline);
  EXPECT_GT(job.lost.server_pttl, 0);
  // It kept retrying in between (each fails fast while partitioned).
  EXPECT_GE(ScriptRuns(*conn, ExtendScript()).size(), 5u);
}

TEST_F(WatchdogFakeTest, PartitionAfterRenewalsIsLostBeforeTheRenewedKeyCanExpire) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  const absl::Duration ttl = absl::Seconds(3);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job));
  Advance(absl::Milliseconds(7500));
  ASSERT_FALSE(job.lost.fired);
  const Lease last = job.watch->lease();
  conn->Partition();
  Advance(absl::Seconds(10));
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(job.lost.at, last.deadline);
  EXPECT_GT(job.lost.server_pttl, 0);
  // The last successful extend was sent at deadline - ttl + drift.
  const absl::Duration drift = DriftAllowance(ttl, 0.01, absl::Milliseconds(2));
  EXPECT_LT(job.lost.at, last.deadline - ttl + drift + ttl);
}

TEST_F(WatchdogFakeTest, SlowNetworkBeyondTheExtendTimeoutIsLostAtTheDeadline) {
  FakeTransport* conn = NewClient();
  SimpleLockOptions options;
  options.command_timeout = absl::Seconds(10);  // longer than the ttl
  SimpleLock holder(&loop_, conn, options);
  const absl::Duration ttl = absl::Seconds(3);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, ttl, &job));
  conn->SetLatency(absl::Seconds(4), absl::Seconds(4));
  Advance(absl::Seconds(20));
  ASSERT_TRUE(job.lost.fired);
  // The extends' own timeout (10 s) did not carry the watch past the
  // deadline.
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(job.lost.at, job.lease->deadline);
  EXPECT_GT(job.lost.server_pttl, 0);
  EXPECT_FALSE(job.watch->IsValid());
}

TEST_F(WatchdogFakeTest, DroppedRepliesAreRetriedAndTheLeaseSurvives) {
  FakeTransport* conn = NewClient();
  SimpleLockOptions options;
  options.command_timeout = absl::Milliseconds(200);
  SimpleLock holder(&loop_, conn, options);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  conn->DropNextReplies(3);
  conn->DropNextRequests(2);
  Advance(absl::Seconds(30));
  EXPECT_FALSE(job.lost.fired) << job.lost.status;
  EXPECT_EQ(Holder("job"), job.lease->token);
}

TEST_F(WatchdogFakeTest, ServerRestartLosingTheKeyIsLostWithFailedPrecondition) {
  SimpleLock holder(&loop_, NewClient());
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  Advance(absl::Seconds(2));
  server_.Restart();
  Advance(absl::Seconds(3));
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(WatchdogFakeTest, ServerClockJumpExpiringTheKeyIsLost) {
  SimpleLock holder(&loop_, NewClient());
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  Advance(absl::Milliseconds(500));
  server_.JumpClock(absl::Seconds(10));
  Advance(absl::Seconds(1));
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(WatchdogFakeTest, StalledLoopIsLostAndSendsNoLateRenewal) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  Advance(absl::Milliseconds(2500));  // renewed at ~1 s and ~2 s
  ASSERT_FALSE(job.lost.fired);
  const size_t extends = ScriptRuns(*conn, ExtendScript()).size();
  ASSERT_GE(extends, 2u);
  const absl::Time deadline = job.watch->lease().deadline;

  // The loop blocks for 10 s: every timer fires late, past the deadline.
  loop_.Stall(absl::Seconds(10));
  Advance(absl::Milliseconds(600));
  ASSERT_TRUE(job.lost.fired);
  EXPECT_THAT(job.lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GT(job.lost.at, deadline);  // noticed late, as it could only be
  EXPECT_EQ(ScriptRuns(*conn, ExtendScript()).size(), extends);
  EXPECT_FALSE(job.watch->IsValid());
}

TEST_F(WatchdogFakeTest, ReleaseEndsRenewalAndNoExtendFollowsTheRelease) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  SimpleLock rival(&loop_, NewClient());
  WatchedJob job;
  ASSERT_NO_FATAL_FAILURE(AcquireAndWatch(holder, absl::Seconds(3), &job));
  conn->SetLatency(absl::Milliseconds(40));
  // Just after a renewal went out: it is in flight when we release.
  Advance(absl::Seconds(1) - absl::Milliseconds(25));
  ASSERT_EQ(ScriptRuns(*conn, ExtendScript()).size(), 1u);
  std::optional<absl::Status> released;
  ASSERT_THAT(job.watch->Release([&](absl::Status s) { released = s; }), IsOk());
  Advance(absl::Seconds(30));
  ASSERT_TRUE(released.has_value());
  EXPECT_THAT(*released, IsOk());
  EXPECT_FALSE(job.lost.fired);
  EXPECT_FALSE(server_.Exists(keys_.LockKey("job")));
  // In the connection's command log, nothing renews after the release.
  const std::vector<size_t> releases = ScriptRuns(*conn, ReleaseScript());
  const std::vector<size_t> extends = ScriptRuns(*conn, ExtendScript());
  ASSERT_EQ(releases.size(), 1u);
  ASSERT_FALSE(extends.empty());
  EXPECT_LT(extends.back(), releases.front());
  // The in-flight renewal did not resurrect it: others can take it.
  EXPECT_THAT(AcquireNow(rival, "job", absl::Seconds(3)), IsOk());
}

TEST_F(WatchdogFakeTest, StopEndsRenewalAndTheKeyExpiresOnItsOwn) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  absl::StatusOr<Lease> lease = AcquireNow(holder, "job", absl::Seconds(3));
  ASSERT_THAT(lease, IsOk());
  Watchdog watchdog(&loop_, &holder);
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*lease, {});
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Seconds(5));
  watch->Stop();
  const size_t extends = ScriptRuns(*conn, ExtendScript()).size();
  Advance(absl::Seconds(4));
  EXPECT_EQ(ScriptRuns(*conn, ExtendScript()).size(), extends);
  EXPECT_FALSE(server_.Exists(keys_.LockKey("job")));
}

TEST_F(WatchdogFakeTest, ReentrantLeaseIsRenewed) {
  FakeTransport* conn = NewClient();
  ReentrantLock holder(&loop_, conn);
  ReentrantLock rival(&loop_, NewClient());
  const absl::Duration ttl = absl::Seconds(3);
  absl::StatusOr<Lease> outer = AcquireNow(holder, "job", ttl, "task");
  ASSERT_THAT(outer, IsOk());
  absl::StatusOr<Lease> inner = AcquireNow(holder, "job", ttl, "task");
  ASSERT_THAT(inner, IsOk());
  Watchdog watchdog(&loop_, &holder);
  Lost lost;
  WatchOptions options = Record(&lost, "job");
  options.release_late_renewal = false;  // nested holds (see WatchOptions)
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*outer, std::move(options));
  ASSERT_THAT(watch, IsOk());
  const absl::Time start = loop_.Now();
  while (loop_.Now() < start + 10 * ttl) {
    Advance(absl::Milliseconds(500));
    ASSERT_THAT(AcquireNow(rival, "job", ttl, "other"),
                StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_FALSE(lost.fired) << lost.status;
  auto hash = server_.GetHash(keys_.LockKey("job"));
  ASSERT_TRUE(hash.has_value());
  // One owner, counted twice, beside the holding's fence (field '#fence').
  std::vector<std::pair<std::string, std::string>> owners;
  for (const auto& field : *hash) {
    if (field.first != "#fence") owners.push_back(field);
  }
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(hash->size(), 2u);
  EXPECT_EQ(owners[0].first, outer->token);
  EXPECT_EQ(owners[0].second, "2");
  EXPECT_GE(ScriptRuns(*conn, ReentrantExtendScript()).size(), 29u);
  // Inner release keeps it (and it stays renewed); the outer ends it.
  EXPECT_THAT(ReleaseNow(holder, *inner), IsOk());
  Advance(absl::Seconds(6));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("job")));
  EXPECT_FALSE(lost.fired);
  std::optional<absl::Status> released;
  ASSERT_THAT(watch->Release([&](absl::Status s) { released = s; }), IsOk());
  Advance(absl::Milliseconds(10));
  EXPECT_THAT(released, ::testing::Optional(IsOk()));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("job")));
}

class WatchdogRedLockTest : public WatchdogFakeTest {
 protected:
  void SetUp() override {
    std::vector<Transport*> transports;
    for (int i = 0; i < 5; ++i) {
      servers_.push_back(std::make_unique<FakeRedis>(&loop_));
      // Never used: declared trusted, so RedLock counts it at once.
      servers_.back()->Execute(TrustDataSetCommand(KeyScheme{}));
      transports.push_back(NewClient(servers_.back().get()));
    }
    absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(&loop_, transports);
    ASSERT_THAT(lock, IsOk());
    redlock_ = *std::move(lock);
  }
  void TearDown() override {
    redlock_.reset();
    Advance(absl::Seconds(1));
    clients_.clear();
  }

  int Holders(const std::string& resource, const std::string& token) {
    int n = 0;
    for (auto& s : servers_) n += s->GetString(keys_.LockKey(resource)) == token;
    return n;
  }

  std::vector<std::unique_ptr<FakeRedis>> servers_;
  std::unique_ptr<RedLock> redlock_;
};

TEST_F(WatchdogRedLockTest, RedLockLeaseIsRenewedByQuorum) {
  const absl::Duration ttl = absl::Seconds(3);
  absl::StatusOr<Lease> lease = AcquireNow(*redlock_, "job", ttl);
  ASSERT_THAT(lease, IsOk());
  Watchdog watchdog(&loop_, redlock_.get());
  Lost lost;
  absl::StatusOr<WatchHandle> watch =
      watchdog.Watch(*lease, Record(&lost, "job", servers_[0].get()));
  ASSERT_THAT(watch, IsOk());
  const absl::Time start = loop_.Now();
  while (loop_.Now() < start + 10 * ttl) {
    Advance(absl::Milliseconds(250));
    ASSERT_GE(Holders("job", lease->token), 3) << loop_.Now() - start;
  }
  EXPECT_FALSE(lost.fired) << lost.status;
  EXPECT_TRUE(watch->IsValid());
  EXPECT_GT(watch->lease().deadline, loop_.Now());
}

TEST_F(WatchdogRedLockTest, RedLockLeaseLosingItsQuorumIsLostBeforeExpiry) {
  const absl::Duration ttl = absl::Seconds(3);
  absl::StatusOr<Lease> lease = AcquireNow(*redlock_, "job", ttl);
  ASSERT_THAT(lease, IsOk());
  Watchdog watchdog(&loop_, redlock_.get());
  Lost lost;
  // Records the key on server 2, one of those about to be cut off.
  absl::StatusOr<WatchHandle> watch =
      watchdog.Watch(*lease, Record(&lost, "job", servers_[2].get()));
  ASSERT_THAT(watch, IsOk());
  Advance(absl::Seconds(4));
  ASSERT_FALSE(lost.fired);
  for (int i = 2; i < 5; ++i) clients_[i]->Partition();
  const Lease last = watch->lease();
  Advance(absl::Seconds(10));
  ASSERT_TRUE(lost.fired);
  EXPECT_THAT(lost.status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LE(lost.at, last.deadline);
  // The cut-off servers' keys were set by the last successful extend, sent
  // at deadline - ttl + drift: they expire no earlier than that + ttl, and
  // were still there when on_lost ran.
  EXPECT_LT(lost.at, last.deadline + redlock_->DriftAllowance(ttl));
  EXPECT_GT(lost.server_pttl, 0);
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(servers_[i]->GetString(keys_.LockKey("job")), std::nullopt)
        << "server " << i << " (expired by now)";
  }
}

}  // namespace
}  // namespace dlock
