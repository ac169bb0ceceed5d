// The semaphore's torture invariant, "never more than N permit holders",
// in virtual time: 7 workers (each a process with its own connection,
// Semaphore, RetryLock and Watchdog) loop acquire -> hold (often longer
// than the TTL, so the watchdog must renew) -> release over a 3-permit
// semaphore while a seeded nemesis
//   - pauses a holder (partitions its connection for 2 x TTL: renewals
//     fail, the watchdog declares the permit lost before it can expire),
//   - kills a holder (it vanishes without releasing; it comes back later as
//     a fresh process; its permit returns after the TTL),
//   - drops replies (acquire/extend/release outcomes unknown),
//   - restarts the server losing every permit (with the restart window on,
//     as the semaphore's table says it must be for such a server).
// At every step (200 us of virtual time) the number of workers that
// believe they hold a valid permit (the watch is valid: not lost, deadline
// not passed) must be <= N, and the cap must have been reached. A restart
// without the window shows the hazard is real: the invariant breaks.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

enum class Fault { kPause, kKill, kDropReplies, kRestart };

struct Spec {
  std::vector<Fault> faults;
  int permits = 3;
  int workers = 7;
  absl::Duration ttl = absl::Milliseconds(300);
  absl::Duration duration = absl::Seconds(20);
  absl::Duration every = absl::Milliseconds(400);
  absl::Duration restart_window = absl::Milliseconds(300);
  uint32_t seed = 1;
};

struct Result {
  int64_t granted = 0, released = 0, lost = 0, killed = 0, faults = 0;
  int max_valid = 0;
  int64_t violations = 0;  // steps with more than N valid holders
};

struct Worker {
  std::unique_ptr<FakeTransport> conn;
  std::unique_ptr<Semaphore> semaphore;
  std::unique_ptr<RetryLock> retry;
  std::unique_ptr<Watchdog> watchdog;
  WatchHandle watch;
  bool busy = false;     // acquiring or holding
  bool dead = false;     // killed, not restarted yet
  uint64_t epoch = 0;    // bumped by a kill: stale callbacks do nothing
};

Result RunTorture(const Spec& spec) {
  ManualEventLoop loop;
  FakeRedis server(&loop);
  server.Execute(TrustDataSetCommand(KeyScheme{}));
  const absl::Duration rtt = absl::Microseconds(200);
  std::mt19937 rng(spec.seed);
  Result result;
  std::vector<std::unique_ptr<Worker>> workers;

  auto build = [&](Worker& w) {
    w.conn = std::make_unique<FakeTransport>(&loop, &server);
    w.conn->SetLatency(rtt);
    SemaphoreOptions so;
    so.permits = spec.permits;
    so.command_timeout = absl::Milliseconds(100);
    so.restart_window = spec.restart_window;
    w.semaphore = std::make_unique<Semaphore>(&loop, w.conn.get(), so);
    RetryLockOptions ro;
    ro.initial_backoff = absl::Milliseconds(10);
    ro.max_backoff = absl::Milliseconds(100);
    ro.jitter = [](absl::Duration cap) { return cap / 2; };
    w.retry = std::make_unique<RetryLock>(&loop, w.semaphore.get(), ro);
    w.watchdog = std::make_unique<Watchdog>(&loop, w.retry.get());
  };

  std::function<void(Worker*)> cycle = [&](Worker* w) {
    if (w->dead || w->busy) return;
    w->busy = true;
    const uint64_t epoch = w->epoch;
    AcquireOptions o;
    o.ttl = spec.ttl;
    o.wait = absl::Seconds(2);
    auto h = w->retry->Acquire("pool", o, [&, w, epoch](absl::StatusOr<Lease> permit) {
      if (w->epoch != epoch) return;
      if (!permit.ok()) {
        w->busy = false;
        loop.RunAfter(absl::Milliseconds(5), [&, w] { cycle(w); });
        return;
      }
      ++result.granted;
      WatchOptions wo;
      wo.on_lost = [&](absl::Status) { ++result.lost; };
      absl::StatusOr<WatchHandle> watch = w->watchdog->Watch(*permit, std::move(wo));
      if (!watch.ok()) {  // granted too late: already past its deadline
        w->busy = false;
        loop.RunAfter(absl::Milliseconds(5), [&, w] { cycle(w); });
        return;
      }
      w->watch = *std::move(watch);
      const absl::Duration hold = absl::Milliseconds(20 + rng() % 700);
      loop.RunAfter(hold, [&, w, epoch] {
        if (w->epoch != epoch) return;
        absl::Status s = w->watch.Release([&, w, epoch](absl::Status st) {
          if (w->epoch != epoch) return;
          if (st.ok()) ++result.released;
          w->busy = false;
          cycle(w);
        });
        if (!s.ok()) {
          w->watch = WatchHandle();
          w->busy = false;
          cycle(w);
        }
      });
    });
    if (!h.ok()) w->busy = false;
  };

  for (int i = 0; i < spec.workers; ++i) {
    workers.push_back(std::make_unique<Worker>());
    build(*workers.back());
  }

  auto holders = [&]() {
    std::vector<Worker*> out;
    for (auto& w : workers) {
      if (!w->dead && w->watch.IsValid()) out.push_back(w.get());
    }
    return out;
  };

  std::function<void()> nemesis = [&] {
    if (!spec.faults.empty()) {
      const Fault f = spec.faults[rng() % spec.faults.size()];
      std::vector<Worker*> h = holders();
      switch (f) {
        case Fault::kPause:
          if (!h.empty()) {
            Worker* w = h[rng() % h.size()];
            w->conn->Partition();
            loop.RunAfter(spec.ttl * 2, [w] { w->conn->Heal(); });
            ++result.faults;
          }
          break;
        case Fault::kKill:
          if (!h.empty()) {
            Worker* w = h[rng() % h.size()];
            // The process dies: nothing of it runs any more (its objects
            // are destroyed; the permit stays on the server until its TTL).
            ++w->epoch;
            w->dead = true;
            w->watch = WatchHandle();
            w->watchdog.reset();
            w->retry.reset();
            w->semaphore.reset();
            w->conn->Close();
            ++result.killed;
            ++result.faults;
            loop.RunAfter(absl::Milliseconds(100 + rng() % 400), [&, w] {
              build(*w);  // a fresh process
              w->dead = false;
              w->busy = false;
              cycle(w);
            });
          }
          break;
        case Fault::kDropReplies:
          workers[rng() % workers.size()]->conn->DropNextReplies(1 + rng() % 2);
          ++result.faults;
          break;
        case Fault::kRestart:
          server.Restart();
          ++result.faults;
          break;
      }
    }
    loop.RunAfter(spec.every + absl::Milliseconds(rng() % 100), [&] { nemesis(); });
  };
  loop.RunAfter(spec.every, [&] { nemesis(); });

  for (auto& w : workers) cycle(w.get());
  const absl::Time end = loop.Now() + spec.duration;
  while (loop.Now() < end) {
    loop.AdvanceTime(absl::Microseconds(200));
    const int valid = static_cast<int>(holders().size());
    result.max_valid = std::max(result.max_valid, valid);
    if (valid > spec.permits) ++result.violations;
  }
  std::printf(
      "semaphore torture: faults %lld granted %lld released %lld lost %lld killed %lld "
      "max holders %d (N = %d), steps over N %lld\n",
      (long long)result.faults, (long long)result.granted, (long long)result.released,
      (long long)result.lost, (long long)result.killed, result.max_valid, spec.permits,
      (long long)result.violations);
  for (auto& w : workers) {
    ++w->epoch;
    w->watch = WatchHandle();
    w->watchdog.reset();
    w->retry.reset();
    w->semaphore.reset();
  }
  loop.RunUntilIdle();
  for (auto& w : workers) w->conn->Close();
  loop.RunUntilIdle();
  return result;
}

TEST(SemaphoreTortureTest, WithoutFaultsNeverMoreThanNHolders) {
  Result r = RunTorture({});
  EXPECT_GT(r.granted, 100);
  EXPECT_EQ(r.max_valid, 3);
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.lost, 0);
}

TEST(SemaphoreTortureTest, PausesKillsAndDroppedRepliesNeverAdmitMoreThanN) {
  Spec s;
  s.faults = {Fault::kPause, Fault::kKill, Fault::kDropReplies};
  s.every = absl::Milliseconds(150);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    s.seed = seed;
    Result r = RunTorture(s);
    EXPECT_GT(r.faults, 50) << seed;
    EXPECT_GT(r.killed, 5) << seed;
    EXPECT_GT(r.lost, 0) << seed;  // pauses made the watchdog give permits up
    EXPECT_GT(r.granted, 50) << seed;
    EXPECT_EQ(r.max_valid, 3) << seed;
    EXPECT_EQ(r.violations, 0) << seed;
  }
}

TEST(SemaphoreTortureTest, RestartsThatLoseThePermitsNeverAdmitMoreThanNWithTheWindow) {
  Spec s;
  s.faults = {Fault::kRestart, Fault::kKill};
  Result r = RunTorture(s);
  EXPECT_GT(r.faults, 10);
  EXPECT_GT(r.lost, 0);  // renewals after a restart are refused
  EXPECT_GT(r.granted, 50);
  EXPECT_EQ(r.violations, 0);
}

// The hazard the window guards against is real: without it, a restarted
// server grants permits while the old holders still trust theirs.
TEST(SemaphoreTortureTest, RestartsWithoutTheWindowDoAdmitMoreThanN) {
  Spec s;
  s.faults = {Fault::kRestart};
  s.restart_window = absl::ZeroDuration();
  Result r = RunTorture(s);
  EXPECT_GT(r.faults, 10);
  EXPECT_GT(r.violations, 0);
}

}  // namespace
}  // namespace dlock
