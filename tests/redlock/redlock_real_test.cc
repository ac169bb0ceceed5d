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
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/redis_servers.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

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
    uv_.Close();  // expects nothing leaked on the loop
  }

  // Starts n servers (//tests/env's RedLock deployment), one connected
  // transport each, and a RedLock over them.
  void StartCluster(int n, RedLockOptions options = DefaultOptions(),
                    ::dlock::test_support::RedisServerOptions server_options = {}) {
    absl::StatusOr<std::vector<std::unique_ptr<RedisServer>>> servers =
        ::dlock::test_support::StartRedisServers(n, server_options);
    ASSERT_THAT(servers, IsOk());
    servers_ = *std::move(servers);
    std::vector<Transport*> raw;
    for (auto& server : servers_) {
      raw.push_back(Connect(server->port()));
      ASSERT_NE(raw.back(), nullptr);
    }
    absl::StatusOr<std::unique_ptr<RedLock>> lock =
        RedLock::Create(uv_.loop(), raw, std::move(options));
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
    const absl::Time start = uv_.loop()->Now();
    absl::Time end;
    absl::StatusOr<AcquireHandle> h = redlock_->Acquire(
        kResource, options, [&](absl::StatusOr<Lease> lease) {
          end = uv_.loop()->Now();
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
    const absl::Time start = uv_.loop()->Now();
    absl::Time end;
    absl::Status s = redlock_->Release(lease, [&](absl::Status st) {
      end = uv_.loop()->Now();
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

  // A connected transport of its own (a brand-new client's connection);
  // the first n are StartCluster's, in server order.
  HiredisTransport* Connect(int port, int db = 0, const std::string& host = "127.0.0.1") {
    HiredisTransportOptions topts;
    topts.host = host;
    topts.port = port;
    topts.db = db;
    topts.reconnect_backoff_min = absl::Milliseconds(50);
    topts.reconnect_backoff_max = absl::Milliseconds(200);
    HiredisTransport* t = uv_.Connect(HiredisTransport::Create(uv_.uv_loop(), topts), kWaitLimit);
    if (t != nullptr) transports_.push_back(t);
    return t;
  }

  // A brand-new RedLock client: new connections to every server, so it
  // never saw any run_id from before a restart.
  std::unique_ptr<RedLock> FreshClient(RedLockOptions options = DefaultOptions()) {
    std::vector<Transport*> raw;
    for (auto& server : servers_) raw.push_back(Connect(server->port()));
    absl::StatusOr<std::unique_ptr<RedLock>> lock =
        RedLock::Create(uv_.loop(), raw, std::move(options));
    EXPECT_TRUE(lock.ok()) << lock.status();
    return lock.ok() ? *std::move(lock) : nullptr;
  }

  absl::StatusOr<Lease> AcquireWith(Lock& lock, AcquireOptions options = {kTtl}) {
    std::optional<absl::StatusOr<Lease>> result;
    absl::StatusOr<AcquireHandle> h = lock.Acquire(
        kResource, options, [&](absl::StatusOr<Lease> lease) { result = std::move(lease); });
    if (!h.ok()) return h.status();
    EXPECT_TRUE(uv_.RunUntil([&] { return result.has_value(); }, kWaitLimit));
    if (!result.has_value()) return absl::InternalError("acquire never called back");
    return *std::move(result);
  }

  // SIGKILL, then start again on the same port (empty without appendonly).
  void KillAndRestart(int i) {
    ASSERT_THAT(servers_[i]->Kill(), IsOk());
    ASSERT_THAT(servers_[i]->Restart(), IsOk());
  }

  ::dlock::test_support::UvClients uv_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<HiredisTransport*> transports_;  // owned by uv_
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
  // The release calls back at quorum (redlock.h); the other two servers'
  // releases complete in the background.
  EXPECT_TRUE(uv_.RunUntil(
      [&] {
        for (int i = 0; i < 5; ++i) {
          if (!KeyOn(i).empty()) return false;
        }
        return true;
      },
      kWaitLimit));
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

// ------------------------------------------------- issue 11 (data-set marker)

// Defect 2: three servers without persistence; client 1 holds the lock
// (ttl 9 s); B then C are killed (-9) and restarted empty on the same ports.
// A brand-new client (it never saw the old run_ids) must not get the quorum
// while client 1 still holds.
TEST_F(RedLockRealTest, ABrandNewClientAfterRestartsWithoutPersistenceCannotTakeAHeldLock) {
  StartCluster(3);
  absl::StatusOr<Lease> held = Acquire(nullptr, {absl::Seconds(9)});
  ASSERT_THAT(held, IsOk());
  KillAndRestart(1);
  KillAndRestart(2);
  std::unique_ptr<RedLock> fresh = FreshClient();
  ASSERT_NE(fresh, nullptr);
  absl::StatusOr<Lease> rival = AcquireWith(*fresh, {absl::Seconds(9)});
  EXPECT_FALSE(rival.ok()) << "both hold: fences " << held->fence << " and "
                           << (rival.ok() ? rival->fence : 0);
  EXPECT_THAT(rival.status().message(), HasSubstr("young"));
  EXPECT_LT(uv_.loop()->Now(), held->deadline) << "the first lease was still valid";
  fresh.reset();
}

// Defect 3: after a restart without persistence of a majority, the next
// holder's fence is above the previous holder's. (Server A, which kept its
// counter, is stopped, so the new quorum is the two restarted servers.)
TEST_F(RedLockRealTest, FenceAfterARestartWithoutPersistenceIsAboveThePreviousHolders) {
  RedLockOptions options = DefaultOptions();
  options.max_ttl = absl::Seconds(1);  // a short restart window, for the test
  StartCluster(3, options);
  absl::StatusOr<Lease> first = Acquire(nullptr, {absl::Milliseconds(900)});
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(Release(*first), IsOk());
  KillAndRestart(1);
  KillAndRestart(2);
  ASSERT_THAT(servers_[0]->Pause(), IsOk());
  std::unique_ptr<RedLock> fresh = FreshClient(options);
  ASSERT_NE(fresh, nullptr);
  // Retries (200 ms apart) until the restarted servers' window has passed.
  absl::StatusOr<Lease> second =
      AcquireWith(*fresh, {absl::Milliseconds(900), absl::Seconds(10)});
  ASSERT_THAT(second, IsOk());
  EXPECT_GT(second->fence, first->fence);
  ASSERT_THAT(servers_[0]->Resume(), IsOk());
  fresh.reset();
}

TEST_F(RedLockRealTest, FlushAllMakesTheDataSetYoungAgain) {
  StartCluster(3);
  ASSERT_THAT(servers_[1]->Command({"FLUSHALL"}), IsOk());
  ASSERT_THAT(servers_[2]->Command({"FLUSHALL"}), IsOk());
  absl::StatusOr<Lease> lease = Acquire();
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("2 young")));
  EXPECT_EQ(KeyOn(0), "") << "a failed acquire releases what it took";
  absl::StatusOr<Reply> marker = servers_[1]->Command({"GET", "dlock:data-set-began"});
  ASSERT_THAT(marker, IsOk());
  EXPECT_TRUE(marker->is_string() && marker->str != "0") << marker->DebugString();
}

// A persisted server (appendonly, appendfsync always) keeps its marker
// across a kill -9 and votes at once; its fence counter goes on.
TEST_F(RedLockRealTest, APersistedServerRestartedKeepsItsMarkerAndVotesAtOnce) {
  ::dlock::test_support::RedisServerOptions persisted;
  persisted.appendonly = true;
  StartCluster(3, DefaultOptions(), persisted);
  absl::StatusOr<Lease> first = Acquire();
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(Release(*first), IsOk());
  for (int i = 0; i < 3; ++i) KillAndRestart(i);
  std::unique_ptr<RedLock> fresh = FreshClient();
  ASSERT_NE(fresh, nullptr);
  absl::StatusOr<Lease> second = AcquireWith(*fresh);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->fence, first->fence + 1);
  fresh.reset();
}

// Item 4: one instance listed twice (same URL, two host names, two DBs) is
// a configuration error, not "busy".
TEST_F(RedLockRealTest, TheSameInstanceListedTwiceIsRefused) {
  StartCluster(1);
  const int port = servers_[0]->port();
  struct Case {
    const char* name;
    std::string host2;
    int db2;
  };
  for (const Case& c : {Case{"same URL", "127.0.0.1", 0}, Case{"localhost", "localhost", 0},
                        Case{"db 1", "127.0.0.1", 1}}) {
    SCOPED_TRACE(c.name);
    RedLockOptions options = DefaultOptions();
    options.server_names = {"first", "second"};
    absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(
        uv_.loop(), {Connect(port), Connect(port, c.db2, c.host2)}, options);
    ASSERT_THAT(lock, IsOk());
    absl::StatusOr<Lease> lease = AcquireWith(**lock);
    EXPECT_THAT(lease, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("same Redis instance")));
    EXPECT_THAT(lease.status().message(), HasSubstr("server 0 (first)"));
    EXPECT_THAT(lease.status().message(), HasSubstr("server 1 (second)"));
    lock->reset();
    EXPECT_EQ(KeyOn(0), "") << "nothing left behind";
  }
}

// SimpleLock on a real server: a restart without persistence never makes a
// fence go backwards; foreign data and an exhausted counter are kInternal;
// restart_window refuses a young server.
TEST_F(RedLockRealTest, SimpleLockFencesForeignDataAndRestartWindowOnARealServer) {
  StartCluster(1);
  SimpleLock lock(uv_.loop(), Connect(servers_[0]->port()));
  absl::StatusOr<Lease> first = AcquireWith(lock);
  ASSERT_THAT(first, IsOk());
  KillAndRestart(0);
  SimpleLock fresh(uv_.loop(), Connect(servers_[0]->port()));
  absl::StatusOr<Lease> second = AcquireWith(fresh);
  ASSERT_THAT(second, IsOk());
  EXPECT_GT(second->fence, first->fence);

  SimpleLockOptions guarded_options;
  guarded_options.restart_window = absl::Minutes(1);
  SimpleLock guarded(uv_.loop(), Connect(servers_[0]->port()), guarded_options);
  ASSERT_THAT(servers_[0]->Command({"DEL", "dlock:{orders/42}"}), IsOk());
  EXPECT_THAT(AcquireWith(guarded), StatusIs(absl::StatusCode::kUnavailable,
                                             HasSubstr("ms left of the restart window")));

  // The acquire's transaction cannot ask PTTL: a string with no TTL reads
  // as held (docs/fences.md); another type is foreign data.
  ASSERT_THAT(servers_[0]->Command({"SET", "dlock:{orders/42}", "no-ttl"}), IsOk());
  EXPECT_THAT(AcquireWith(fresh), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(servers_[0]->Command({"DEL", "dlock:{orders/42}"}), IsOk());
  ASSERT_THAT(servers_[0]->Command({"HSET", "dlock:{orders/42}", "f", "v"}), IsOk());
  EXPECT_THAT(AcquireWith(fresh), StatusIs(absl::StatusCode::kInternal,
                                           HasSubstr("foreign data under the lock key")));
  ASSERT_THAT(servers_[0]->Command({"DEL", "dlock:{orders/42}"}), IsOk());
  ASSERT_THAT(
      servers_[0]->Command({"SET", "dlock:fence-hwm", "9223372036854775807"}),
      IsOk());
  EXPECT_THAT(AcquireWith(fresh),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("is exhausted")));
  EXPECT_EQ(KeyOn(0), "");
}

}  // namespace
}  // namespace dlock
