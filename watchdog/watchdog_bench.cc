// watchdog_bench: what watching many leases costs the host loop, measured
// on the in-memory fake in virtual time (so the numbers are CPU and memory,
// never waiting). It measures, never asserts.
//
//   bazel run -c opt //watchdog:watchdog_bench -- --leases=10000 --ttls=10
//
// Two setups, each holding --leases leases for --ttls TTLs of --ttl_ms:
//   instant  the Watchdog over a Lock whose Extend succeeds on the next loop
//            turn: the watchdog's own cost (timers, schedule, callbacks).
//   fake     the Watchdog over SimpleLock -> FakeTransport -> FakeRedis (Lua
//            scripts): what a test host pays, server side included.
// Reported: heap bytes per watched lease (growth of the allocator's in-use
// bytes across Watch() calls; includes the lease strings), loop CPU per
// renewal and per lease per second of held time, renewals sent, and how
// many loop turns carried them (batching).
#include <malloc.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"

ABSL_FLAG(int, leases, 10000, "leases watched at once");
ABSL_FLAG(int, ttl_ms, 30000, "lease TTL");
ABSL_FLAG(int, ttls, 10, "how many TTLs to hold them");

namespace dlock {
namespace {

// Benchmarks may read the CPU clock (they measure the code, not the lease).
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t HeapInUse() { return mallinfo2().uordblks; }

// Extend succeeds on the next loop turn with a deadline from the send time.
class InstantLock : public Lock {
 public:
  explicit InstantLock(EventLoop* loop) : loop_(loop) {}
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view, const AcquireOptions&,
                                        LeaseCallback) override {
    return absl::UnimplementedError("bench");
  }
  absl::Status Release(const Lease&, StatusCallback cb) override {
    loop_->RunAfter(absl::ZeroDuration(),
                    [cb = std::move(cb)]() mutable { std::move(cb)(absl::OkStatus()); });
    return absl::OkStatus();
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl, LeaseCallback cb) override {
    ++extends;
    Lease renewed = lease;
    renewed.ttl = ttl;
    renewed.deadline = loop_->Now() + ttl - absl::Milliseconds(2);
    loop_->RunAfter(absl::ZeroDuration(),
                    [cb = std::move(cb), renewed]() mutable { std::move(cb)(renewed); });
    return absl::OkStatus();
  }
  int64_t extends = 0;

 private:
  EventLoop* loop_;
};

// Counts the loop turns in which at least one renewal was sent.
class TurnCounter : public Lock {
 public:
  TurnCounter(EventLoop* loop, Lock* inner) : loop_(loop), inner_(inner) {}
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view r, const AcquireOptions& o,
                                        LeaseCallback cb) override {
    return inner_->Acquire(r, o, std::move(cb));
  }
  absl::Status Release(const Lease& l, StatusCallback cb) override {
    return inner_->Release(l, std::move(cb));
  }
  absl::Status Extend(const Lease& l, absl::Duration ttl, LeaseCallback cb) override {
    ++extends;
    if (loop_->Now() != last_) {
      ++turns;
      last_ = loop_->Now();
    }
    return inner_->Extend(l, ttl, std::move(cb));
  }
  int64_t extends = 0;
  int64_t turns = 0;

 private:
  EventLoop* loop_;
  Lock* inner_;
  absl::Time last_ = absl::InfinitePast();
};

void Report(const char* setup, int leases, absl::Duration held, size_t heap_per_lease,
            double cpu, const TurnCounter& counter, int lost) {
  std::printf(
      "%-8s leases=%d held=%s heap_per_lease=%zuB renewals=%lld turns=%lld "
      "cpu=%.3fs cpu_per_renewal=%.2fus cpu_per_lease_second=%.3fus lost=%d\n",
      setup, leases, absl::FormatDuration(held).c_str(), heap_per_lease,
      static_cast<long long>(counter.extends), static_cast<long long>(counter.turns), cpu,
      counter.extends > 0 ? cpu * 1e6 / counter.extends : 0.0,
      cpu * 1e6 / (leases * absl::ToDoubleSeconds(held)), lost);
}

// Watches `leases` with `lock` for `held`, reporting cost.
void Run(const char* setup, ManualEventLoop& loop, Lock& lock, std::vector<Lease> leases,
         absl::Duration held) {
  TurnCounter counter(&loop, &lock);
  int lost = 0;
  std::vector<WatchHandle> handles;
  handles.reserve(leases.size());
  auto watchdog = std::make_unique<Watchdog>(&loop, &counter);
  const size_t heap_before = HeapInUse();
  for (const Lease& lease : leases) {
    WatchOptions options;
    options.on_lost = [&lost](absl::Status) { ++lost; };
    absl::StatusOr<WatchHandle> h = watchdog->Watch(lease, std::move(options));
    if (!h.ok()) {
      std::fprintf(stderr, "Watch: %s\n", h.status().ToString().c_str());
      return;
    }
    handles.push_back(*std::move(h));
  }
  const size_t heap_after = HeapInUse();
  const size_t per_lease =
      heap_after > heap_before ? (heap_after - heap_before) / leases.size() : 0;
  const double cpu0 = CpuSeconds();
  loop.AdvanceTime(held);
  const double cpu = CpuSeconds() - cpu0;
  Report(setup, static_cast<int>(leases.size()), held, per_lease, cpu, counter, lost);
  handles.clear();
  watchdog.reset();
  loop.AdvanceTime(absl::Seconds(1));
}

int Main() {
  const int n = absl::GetFlag(FLAGS_leases);
  const absl::Duration ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
  const absl::Duration held = ttl * absl::GetFlag(FLAGS_ttls);

  {
    ManualEventLoop loop;
    InstantLock lock(&loop);
    std::vector<Lease> leases;
    for (int i = 0; i < n; ++i) {
      Lease l;
      l.resource = absl::StrCat("job/", i);
      l.token = absl::StrCat("0123456789abcdef0123456789abcd", i % 100);
      l.ttl = ttl;
      l.deadline = loop.Now() + ttl - absl::Milliseconds(2);
      leases.push_back(std::move(l));
      if (i % 500 == 499) loop.AdvanceTime(absl::Milliseconds(1));
    }
    Run("instant", loop, lock, std::move(leases), held);
  }
  {
    ManualEventLoop loop;
    FakeRedis server(&loop);
    FakeTransport conn(&loop, &server);
    conn.SetLatency(absl::Microseconds(100));
    SimpleLock lock(&loop, &conn);
    std::vector<Lease> leases;
    int failed = 0;
    for (int i = 0; i < n; ++i) {
      AcquireOptions o;
      o.ttl = ttl;
      absl::StatusOr<AcquireHandle> h =
          lock.Acquire(absl::StrCat("job/", i), o, [&](absl::StatusOr<Lease> r) {
            if (r.ok()) leases.push_back(*std::move(r));
            else ++failed;
          });
      if (!h.ok()) ++failed;
      if (i % 500 == 499) loop.AdvanceTime(absl::Milliseconds(1));
    }
    loop.AdvanceTime(absl::Milliseconds(10));
    if (failed > 0) std::fprintf(stderr, "%d acquisitions failed\n", failed);
    Run("fake", loop, lock, std::move(leases), held);
  }
  return 0;
}

}  // namespace
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::Main();
}
