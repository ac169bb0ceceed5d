// RedLock against 3 and 5 real redis-server processes (each started by the
// test on a free loopback port), reached through HiredisTransport on a
// UvEventLoop.
//
// Durations are measured on the loop's own clock (EventLoop::Now()) and
// asserted against bounds derived from the configured per-server timeout,
// generous enough for sanitizer builds on a loaded 2-core machine. Nothing
// sleeps: the loop runs until the awaited callback ran (bounded).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/tests/testing/redis_server.h"
#include "dlock/tests/testing/status_matchers.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace {

using ::dlock::testing::IsOk;
using ::dlock::testing::RedisServer;
using ::dlock::testing::StatusIs;

// Generous per-server deadline for sanitizer builds on a loaded CI machine
// (every test target runs in parallel on 2 cores); every timing bound
// below is derived from it.
constexpr absl::Duration kServerTimeout = absl::Seconds(1);
constexpr absl::Duration kTtl = absl::Seconds(10);
constexpr absl::Duration kWaitLimit = absl::Seconds(20);
constexpr char kResource[] = "orders/42";

class RedLockRealTest : public ::testing::Test {
 protected:
  ~RedLockRealTest() override {
    redlock_.reset();
    for (auto& t : transports_) t->Close();
    transports_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);
  }

  // Starts n servers, one connected transport each, and a RedLock over them.
  void StartCluster(int n, RedLockOptions options = DefaultOptions()) {
    loop_ = std::make_unique<UvEventLoop>(uv_.get());
    std::vector<Transport*> raw;
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(*std::move(server));
      HiredisTransportOptions topts;
      topts.port = servers_.back()->port();
      topts.reconnect_backoff_min = absl::Milliseconds(50);
      topts.reconnect_backoff_max = absl::Milliseconds(200);
      absl::StatusOr<std::unique_ptr<HiredisTransport>> t =
          HiredisTransport::Create(uv_.get(), topts);
      ASSERT_TRUE(t.ok()) << t.status();
      transports_.push_back(*std::move(t));
      bool up = false;
      ASSERT_THAT(transports_.back()->Connect([&up](absl::Status s) {
        EXPECT_THAT(s, IsOk());
        up = true;
      }), IsOk());
      ASSERT_TRUE(uv_.RunUntil([&] { return up; }, kWaitLimit));
      raw.push_back(transports_.back().get());
    }
    absl::StatusOr<std::unique_ptr<RedLock>> lock =
        RedLock::Create(loop_.get(), raw, std::move(options));
    ASSERT_TRUE(lock.ok()) << lock.status();
    redlock_ = *std::move(lock);
  }

  static RedLockOptions DefaultOptions() {
    RedLockOptions options;
    options.server_timeout = kServerTimeout;
    options.retry_count = 0;
    return options;
  }

  // Runs an Acquire to completion; `elapsed` gets its duration on Now().
  absl::StatusOr<Lease> Acquire(absl::Duration* elapsed = nullptr,
                                AcquireOptions options = {kTtl}) {
    std::optional<absl::StatusOr<Lease>> result;
    const absl::Time start = loop_->Now();
    absl::Time end;
    absl::StatusOr<AcquireHandle> h = redlock_->Acquire(
        kResource, options, [&](absl::StatusOr<Lease> lease) {
          end = loop_->Now();
          result = std::move(lease);
        });
    if (!h.ok()) return h.status();
    EXPECT_TRUE(uv_.RunUntil([&] { return result.has_value(); }, kWaitLimit));
    if (!result.has_value()) return absl::InternalError("acquire never called back");
    if (elapsed != nullptr) *elapsed = end - start;
    return *std::move(result);
  }

  absl::Status Release(const Lease& lease, absl::Duration* elapsed = nullptr) {
    std::optional<absl::Status> result;
    const absl::Time start = loop_->Now();
    absl::Time end;
    absl::Status s = redlock_->Release(lease, [&](absl::Status st) {
      end = loop_->Now();
      result = std::move(st);
    });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return result.has_value(); }, kWaitLimit));
    if (!result.has_value()) return absl::InternalError("release never called back");
    if (elapsed != nullptr) *elapsed = end - start;
    return *result;
  }

  absl::StatusOr<Lease> Extend(const Lease& lease, absl::Duration ttl) {
    std::optional<absl::StatusOr<Lease>> result;
    absl::Status s = redlock_->Extend(lease, ttl, [&](absl::StatusOr<Lease> l) {
      result = std::move(l);
    });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return result.has_value(); }, kWaitLimit));
    if (!result.has_value()) return absl::InternalError("extend never called back");
    return *std::move(result);
  }

  // The token stored under the lock key on server i, or "" if none.
  std::string KeyOn(int i) {
    absl::StatusOr<Reply> r = servers_[i]->Command({"GET", "dlock:{orders/42}"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->is_string() ? r->str : "";
  }
  int64_t PttlOn(int i) {
    absl::StatusOr<Reply> r = servers_[i]->Command({"PTTL", "dlock:{orders/42}"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->is_integer() ? r->integer : -3;
  }

  ::dlock::testing::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<HiredisTransport>> transports_;
  std::unique_ptr<RedLock> redlock_;
};

TEST_F(RedLockRealTest, AcquireExtendReleaseOnThreeServers) {
  StartCluster(3);
  absl::StatusOr<Lease> lease = Acquire();
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->ttl, kTtl);
  EXPECT_GE(lease->fence, 1);
  // A quorum granted; the third server gets the key too.
  EXPECT_TRUE(uv_.RunUntil(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (KeyOn(i) != lease->token) return false;
        }
        return true;
      },
      kWaitLimit));

  // A second acquire of the same resource is refused by every server.
  EXPECT_THAT(Acquire(), StatusIs(absl::StatusCode::kAborted));

  absl::StatusOr<Lease> extended = Extend(*lease, absl::Seconds(20));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(extended->ttl, absl::Seconds(20));
  EXPECT_GT(extended->deadline, lease->deadline);
  // A quorum answered; the third server gets the extend too.
  EXPECT_TRUE(uv_.RunUntil(
      [&] { return PttlOn(0) > 10000 && PttlOn(1) > 10000 && PttlOn(2) > 10000; },
      kWaitLimit));

  EXPECT_THAT(Release(*extended), IsOk());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(KeyOn(i), "") << "server " << i;
  EXPECT_THAT(Release(*extended), StatusIs(absl::StatusCode::kFailedPrecondition));

  // Free again; the next holder gets a larger fence.
  absl::StatusOr<Lease> again = Acquire();
  ASSERT_THAT(again, IsOk());
  EXPECT_GT(again->fence, lease->fence);
  EXPECT_THAT(Release(*again), IsOk());
}

TEST_F(RedLockRealTest, AcquireExtendReleaseOnFiveServers) {
  StartCluster(5);
  EXPECT_EQ(redlock_->quorum(), 3);
  absl::StatusOr<Lease> lease = Acquire();
  ASSERT_THAT(lease, IsOk());
  // A quorum granted at once; the other two get the key too.
  EXPECT_TRUE(uv_.RunUntil(
      [&] {
        for (int i = 0; i < 5; ++i) {
          if (KeyOn(i) != lease->token) return false;
        }
        return true;
      },
      kWaitLimit));
  absl::StatusOr<Lease> extended = Extend(*lease, absl::Seconds(15));
  ASSERT_THAT(extended, IsOk());
  EXPECT_THAT(Release(*extended), IsOk());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(KeyOn(i), "") << "server " << i;
}

TEST_F(RedLockRealTest, OneServerKilledMidTestLeavesTheLockWorkingOnAMajority) {
  StartCluster(3);
  absl::StatusOr<Lease> lease = Acquire();
  ASSERT_THAT(lease, IsOk());

  ASSERT_THAT(servers_[2]->Kill(), IsOk());
  // Extend and release still reach a quorum (2 of 3).
  absl::StatusOr<Lease> extended = Extend(*lease, kTtl);
  ASSERT_THAT(extended, IsOk());
  EXPECT_THAT(Release(*extended), IsOk());
  EXPECT_EQ(KeyOn(0), "");
  EXPECT_EQ(KeyOn(1), "");

  // A new acquisition succeeds on the two survivors...
  absl::StatusOr<Lease> second = Acquire();
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(KeyOn(0), second->token);
  EXPECT_EQ(KeyOn(1), second->token);
  EXPECT_THAT(Release(*second), IsOk());

  // ...but not once a majority is gone: servers down, no contention.
  ASSERT_THAT(servers_[1]->Kill(), IsOk());
  EXPECT_THAT(Acquire(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(KeyOn(0), "") << "a failed acquire must release what it took";
}

TEST_F(RedLockRealTest, StoppedMinorityDoesNotSlowAcquisitionBeyondServerTimeout) {
  StartCluster(5);
  // Warm up (scripts cached, run_ids known) so the measurement is the lock.
  absl::StatusOr<Lease> warm = Acquire();
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(Release(*warm), IsOk());

  ASSERT_THAT(servers_[3]->Pause(), IsOk());
  ASSERT_THAT(servers_[4]->Pause(), IsOk());

  absl::Duration elapsed;
  absl::StatusOr<Lease> lease = Acquire(&elapsed);
  ASSERT_THAT(lease, IsOk());
  // The quorum (3 live servers) decides; the stopped two are not awaited.
  EXPECT_LT(elapsed, kServerTimeout) << elapsed;
  EXPECT_EQ(KeyOn(0), lease->token);

  // Release waits for every server, but no longer than the per-server
  // deadline (plus loop slack).
  absl::Duration release_elapsed;
  EXPECT_THAT(Release(*lease, &release_elapsed), IsOk());
  EXPECT_LT(release_elapsed, kServerTimeout * 2) << release_elapsed;

  // A stopped majority: the attempt ends at the per-server deadline.
  ASSERT_THAT(servers_[2]->Pause(), IsOk());
  absl::Duration failed_elapsed;
  EXPECT_THAT(Acquire(&failed_elapsed), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_GE(failed_elapsed, kServerTimeout) << failed_elapsed;
  EXPECT_LT(failed_elapsed, kServerTimeout * 2) << failed_elapsed;

  for (int i = 2; i < 5; ++i) ASSERT_THAT(servers_[i]->Resume(), IsOk());
  // Once resumed, the stopped servers ran the late acquires and the
  // releases queued behind them: nothing is left anywhere.
  ASSERT_TRUE(uv_.RunUntil(
      [&] {
        for (int i = 0; i < 5; ++i) {
          if (!KeyOn(i).empty()) return false;
        }
        return true;
      },
      kWaitLimit));
  absl::StatusOr<Lease> after = Acquire();
  ASSERT_THAT(after, IsOk());
  EXPECT_THAT(Release(*after), IsOk());
}

TEST_F(RedLockRealTest, RestartedServerIsNotCountedUntilMaxTtlPassed) {
  RedLockOptions options = DefaultOptions();
  options.delayed_restart = true;
  options.max_ttl = absl::Minutes(5);
  StartCluster(3, options);
  absl::StatusOr<Lease> warm = Acquire();
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(Release(*warm), IsOk());
  const std::string old_run_id = redlock_->server_status(0).run_id;
  ASSERT_FALSE(old_run_id.empty());

  ASSERT_THAT(servers_[0]->Restart(), IsOk());
  // Wait for the transport to reconnect (it backs off after losing a young
  // connection); the next acquire's INFO then shows the new run_id. A
  // command may still fail on the dead connection first, so allow a few.
  for (int i = 0; i < 5 && redlock_->server_status(0).restarts_observed == 0; ++i) {
    std::optional<absl::Status> up;
    ASSERT_THAT(transports_[0]->Connect([&](absl::Status s) { up = s; }), IsOk());
    ASSERT_TRUE(uv_.RunUntil([&] { return up.has_value(); }, kWaitLimit));
    absl::StatusOr<Lease> lease = Acquire();
    if (lease.ok()) ASSERT_THAT(Release(*lease), IsOk());
  }
  RedLock::ServerStatus status = redlock_->server_status(0);
  EXPECT_EQ(status.restarts_observed, 1);
  EXPECT_TRUE(status.quarantined);
  EXPECT_NE(status.run_id, old_run_id);

  // Servers 0 (restarted, not counted) and 2 grant; 1 is down: no quorum.
  ASSERT_THAT(servers_[1]->Kill(), IsOk());
  EXPECT_THAT(Acquire(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(KeyOn(0), "");
  EXPECT_EQ(KeyOn(2), "");
}

}  // namespace
}  // namespace dlock
