// The deterministic half of the torture run: the same workers
// (TortureClient), fenced register and checker as the real-process run,
// but on FakeRedis servers and a ManualEventLoop, so faults a real machine
// cannot produce on demand are injected at exact virtual times:
//   - the lock server's clock jumps forward past the TTL (keys expire under
//     a holder's feet);
//   - replies are dropped (acquire/release outcomes unknown);
//   - a holder is partitioned from the lock server while its writes to the
//     store are delayed past the TTL (a slow, half-broken network);
//   - the lock server restarts and loses everything (no persistence);
//   - RedLock with one of three servers' clocks jumping.
// Every run is reproducible: seeded fault schedule, pinned retry jitter,
// virtual time. The tests assert safety (no lost fenced update) and that
// each fault really produced the hazard it is meant to (overlapping holders,
// stale writes rejected), which in virtual time is deterministic.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/tests/torture/torture_client.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

enum class FakeFault { kNone, kClockJump, kDropReplies, kPartitionHolder, kRestart };

struct FakeSpec {
  FakeFault fault = FakeFault::kNone;
  int servers = 1;        // 1: RetryLock over SimpleLock; 3: RedLock
  int clients = 3;
  absl::Duration duration = absl::Seconds(20);
  absl::Duration ttl = absl::Milliseconds(500);
  absl::Duration every = absl::Milliseconds(700);  // between faults
  uint32_t seed = 1;
};

struct FakeResult {
  Report report;
  int64_t faults = 0;
};

struct Client {
  std::vector<std::unique_ptr<FakeTransport>> lock_conns;
  std::unique_ptr<FakeTransport> store_conn;
  std::unique_ptr<SimpleLock> simple;
  std::unique_ptr<RetryLock> retry;
  std::unique_ptr<RedLock> redlock;
  std::unique_ptr<TortureClient> worker;
  bool in_cs = false;
};

FakeResult RunFake(const FakeSpec& spec) {
  ManualEventLoop loop;
  std::vector<std::unique_ptr<FakeRedis>> servers;
  for (int i = 0; i < spec.servers; ++i) servers.push_back(std::make_unique<FakeRedis>(&loop));
  FakeRedis store(&loop);
  const absl::Time origin = loop.Now();
  auto clock = [&loop, origin] { return absl::ToInt64Nanoseconds(loop.Now() - origin); };
  const absl::Duration rtt = absl::Microseconds(200);

  std::vector<CsRecord> records;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < spec.clients; ++c) {
    auto cl = std::make_unique<Client>();
    std::vector<Transport*> ts;
    for (auto& s : servers) {
      cl->lock_conns.push_back(std::make_unique<FakeTransport>(&loop, s.get()));
      cl->lock_conns.back()->SetLatency(rtt);
      ts.push_back(cl->lock_conns.back().get());
    }
    cl->store_conn = std::make_unique<FakeTransport>(&loop, &store);
    cl->store_conn->SetLatency(rtt);
    Lock* lock;
    if (spec.servers == 1) {
      SimpleLockOptions so;
      so.command_timeout = absl::Milliseconds(100);
      cl->simple = std::make_unique<SimpleLock>(&loop, ts[0], so);
      RetryLockOptions ro;
      ro.initial_backoff = absl::Milliseconds(10);
      ro.max_backoff = absl::Milliseconds(100);
      ro.jitter = [](absl::Duration cap) { return cap / 2; };
      cl->retry = std::make_unique<RetryLock>(&loop, cl->simple.get(), ro);
      lock = cl->retry.get();
    } else {
      RedLockOptions ro;
      ro.retry_delay = absl::Milliseconds(20);
      ro.retry_jitter = absl::Milliseconds(10);
      ro.max_ttl = absl::Seconds(2);
      ro.jitter_seed = spec.seed * 100 + c + 1;
      auto rl = RedLock::Create(&loop, ts, ro);
      EXPECT_TRUE(rl.ok()) << rl.status();
      cl->redlock = *std::move(rl);
      lock = cl->redlock.get();
    }
    ClientOptions co;
    co.worker = c;
    co.acquire.ttl = spec.ttl;
    co.acquire.wait = absl::Seconds(2);
    co.hold = absl::Milliseconds(20);
    co.store_timeout = absl::Seconds(5);
    Client* raw = cl.get();
    cl->worker = std::make_unique<TortureClient>(
        &loop, lock, cl->store_conn.get(), co, clock,
        [&records](const CsRecord& r) { records.push_back(r); },
        [raw](TortureClient::Phase p) { raw->in_cs = p != TortureClient::Phase::kOut; });
    clients.push_back(std::move(cl));
  }

  // The nemesis: a seeded schedule of faults at virtual times.
  std::mt19937 rng(spec.seed);
  FakeResult result;
  std::function<void()> fault = [&] {
    switch (spec.fault) {
      case FakeFault::kNone:
        return;
      case FakeFault::kClockJump:
        // One server (a minority with RedLock) jumps past every lease.
        servers[0]->JumpClock(spec.ttl * 2);
        ++result.faults;
        break;
      case FakeFault::kDropReplies: {
        Client& c = *clients[rng() % clients.size()];
        c.lock_conns[rng() % c.lock_conns.size()]->DropNextReplies(1 + rng() % 2);
        ++result.faults;
        break;
      }
      case FakeFault::kPartitionHolder: {
        for (auto& c : clients) {
          if (!c->in_cs) continue;
          for (auto& t : c->lock_conns) t->Partition();
          c->store_conn->SetLatency(spec.ttl * 3);
          ++result.faults;
          Client* held = c.get();
          loop.RunAfter(spec.ttl * 2, [held, rtt] {
            for (auto& t : held->lock_conns) t->Heal();
            held->store_conn->SetLatency(rtt);
          });
          break;
        }
        break;
      }
      case FakeFault::kRestart:
        servers[0]->Restart();
        ++result.faults;
        break;
    }
    loop.RunAfter(spec.every + absl::Milliseconds(rng() % 100), [&] { fault(); });
  };
  loop.RunAfter(spec.every, [&] { fault(); });

  for (auto& c : clients) c->worker->Start();
  const absl::Time end = loop.Now() + spec.duration;
  while (loop.Now() < end) loop.AdvanceTime(absl::Microseconds(200));
  int stopped = 0;
  for (auto& c : clients) c->worker->Stop([&stopped] { ++stopped; });
  // Heal everything so the stops can finish, then run out the clock.
  for (auto& c : clients) {
    for (auto& t : c->lock_conns) t->Heal();
    c->store_conn->SetLatency(rtt);
  }
  for (int i = 0; i < 100000 && stopped < spec.clients; ++i) {
    loop.AdvanceTime(absl::Milliseconds(1));
  }
  EXPECT_EQ(stopped, spec.clients) << "workers did not stop";

  Counters counters;
  StoreKeys keys;
  auto get = [&](const std::string& k) {
    auto v = store.GetString(k);
    return v ? std::strtoll(v->c_str(), nullptr, 10) : 0;
  };
  counters.reg = get(keys.reg);
  counters.acc = get(keys.acc);
  counters.unf = get(keys.unf);
  counters.unf_n = get(keys.unf_n);
  result.report = CheckRecords(records, counters);
  const Report& p = result.report;
  std::printf(
      "fake fault %d servers %d: faults %lld granted %lld completed %lld overlaps %lld "
      "stale %lld expired %lld store_err %lld lost_fenced %lld lost_unfenced %lld\n",
      static_cast<int>(spec.fault), spec.servers, (long long)result.faults,
      (long long)p.cs_attempted, (long long)p.cs_completed, (long long)p.overlaps,
      (long long)p.stale_rejected, (long long)p.expired_locally, (long long)p.store_errors,
      (long long)p.lost_fenced, (long long)p.lost_unfenced);
  for (auto& c : clients) c->worker.reset();
  for (auto& c : clients) {
    c->retry.reset();
    c->simple.reset();
    c->redlock.reset();
  }
  loop.RunUntilIdle();
  clients.clear();
  return result;
}

// Full safety: never two holders at once, and no update lost, fenced or
// not (the unfenced twin included).
void ExpectNoOverlapAndNoLostUpdate(const Report& p) {
  EXPECT_EQ(p.overlaps, 0);
  EXPECT_EQ(p.lost_fenced, 0);
  EXPECT_EQ(p.lost_unfenced, 0);
}

TEST(FakeTortureTest, WithoutFaultsHoldersNeverOverlap) {
  FakeResult r = RunFake({});
  EXPECT_GT(r.report.cs_completed, 100);
  ExpectNoOverlapAndNoLostUpdate(r.report);
  EXPECT_EQ(r.report.stale_rejected, 0);
}

// Runs `fault` every `every` (on `servers` servers) and checks the nemesis
// really injected it.
FakeResult RunFaulted(FakeFault fault, int servers = 1,
                      absl::Duration every = FakeSpec().every) {
  FakeSpec s;
  s.fault = fault;
  s.servers = servers;
  s.every = every;
  FakeResult r = RunFake(s);
  EXPECT_GT(r.faults, 0) << "no fault injected";
  return r;
}

TEST(FakeTortureTest, ClockJumpOnTheServerIsCaughtByFencing) {
  FakeResult r = RunFaulted(FakeFault::kClockJump);
  EXPECT_GT(r.report.cs_completed, 0);
  EXPECT_EQ(r.report.lost_fenced, 0);
}

TEST(FakeTortureTest, DroppedRepliesLeaveNoLockBehindAndLoseNoUpdate) {
  FakeResult r = RunFaulted(FakeFault::kDropReplies, 1, absl::Milliseconds(50));
  EXPECT_GT(r.report.cs_completed, 0);
  ExpectNoOverlapAndNoLostUpdate(r.report);
}

TEST(FakeTortureTest, PartitionedHolderWithSlowWritesIsFencedOff) {
  FakeResult r = RunFaulted(FakeFault::kPartitionHolder);
  EXPECT_GT(r.report.overlaps, 0);
  EXPECT_GT(r.report.stale_rejected, 0);
  EXPECT_EQ(r.report.lost_fenced, 0);
}

TEST(FakeTortureTest, RestartWithoutPersistenceIsReported) {
  // No safety promise (lock key and fence counter are lost); only run and
  // print the numbers for TORTURE.md.
  RunFaulted(FakeFault::kRestart);
}

TEST(FakeTortureTest, RedLockWithOneServersClockJumpingLosesNoUpdate) {
  FakeResult r = RunFaulted(FakeFault::kClockJump, /*servers=*/3);
  EXPECT_GT(r.report.cs_completed, 0);
  ExpectNoOverlapAndNoLostUpdate(r.report);
}

TEST(FakeTortureTest, SameSeedGivesTheSameRun) {
  FakeSpec s;
  s.fault = FakeFault::kPartitionHolder;
  s.duration = absl::Seconds(5);
  FakeResult a = RunFake(s);
  FakeResult b = RunFake(s);
  EXPECT_EQ(a.faults, b.faults);
  EXPECT_EQ(a.report.cs_attempted, b.report.cs_attempted);
  EXPECT_EQ(a.report.cs_completed, b.report.cs_completed);
  EXPECT_EQ(a.report.overlaps, b.report.overlaps);
  EXPECT_EQ(a.report.stale_rejected, b.report.stale_rejected);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
