// Connection pool capped across processes: a database accepts at most 3
// connections from the whole fleet. 8 workers (each with its own Redis
// connection, as separate processes would have) each run 2 jobs; a job
// takes one of 3 permits of the "orders-db" Semaphore (waiting through a
// RetryLock, woken when a permit is given back), opens a "connection"
// (INCR of a counter on Redis: its reply is how many are open), works 100 ms,
// closes it (DECR) and gives the permit back.
//
// One more worker crashes while holding a permit: it never releases it.
// Its permit is a lease with a 300 ms TTL, so it comes back by itself: the
// others work with 2 connections at first, then with all 3.
//
// Result: 16 jobs done, at most 3 connections ever open at once, and 3
// reached (so the crashed worker's permit did come back). With --uncapped the jobs skip
// the semaphore and the example must notice more than 3 open connections
// (exit 1).
//
//   bazel run //examples:connection_pool [-- --redis=redis://127.0.0.1:6379]
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/transport/transport.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(int, workers, 8, "workers (processes) sharing the pool");
ABSL_FLAG(int, jobs, 2, "jobs per worker, each needing one connection");
ABSL_FLAG(int, pool_size, 3, "connections the database accepts");
ABSL_FLAG(bool, uncapped, false, "skip the semaphore (the example must then fail)");

namespace dlock {
namespace examples {
namespace {

constexpr char kResource[] = "orders-db";
constexpr char kOpenKey[] = "pool:orders-db:open";

struct Worker {
  Worker(int id, EventLoop* loop, std::unique_ptr<Transport> t, int64_t pool_size)
      : id(id), transport(std::move(t)),
        permits(loop, transport.get(), Options(pool_size)),
        waiting(loop, &permits) {}
  static SemaphoreOptions Options(int64_t pool_size) {
    SemaphoreOptions o;
    o.permits = pool_size;
    return o;
  }
  int id;
  std::unique_ptr<Transport> transport;
  Semaphore permits;
  RetryLock waiting;
  int jobs_left = 0;
};

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  const int pool_size = absl::GetFlag(FLAGS_pool_size);
  const bool uncapped = absl::GetFlag(FLAGS_uncapped);
  int done = 0, failed = 0;
  int64_t max_open = 0;
  bool crashed_permit_held = false;
  {
    auto admin = e.Connect(0);
    bool reset = false;
    admin->Send({"DEL", kOpenKey}, absl::Seconds(2),
                [&](absl::StatusOr<Reply>) { reset = true; }).IgnoreError();
    e.RunUntil([&] { return reset; });

    // The worker that crashes: takes a permit (300 ms TTL) and is never
    // heard of again.
    auto crashed = std::make_unique<Worker>(-1, e.loop(), e.Connect(0), pool_size);
    if (!uncapped) {
      AcquireOptions o;
      o.ttl = absl::Milliseconds(300);
      crashed->permits.Acquire(kResource, o, [&](absl::StatusOr<Lease> l) {
        crashed_permit_held = l.ok();
        Say(l.ok() ? absl::StrCat("worker X takes a permit (fence ", l->fence,
                                  ") and crashes without giving it back")
                   : absl::StrCat("worker X: ", l.status().ToString()));
      }).IgnoreError();
      e.RunUntil([&] { return crashed_permit_held; });
    }
    Say(absl::StrCat(absl::GetFlag(FLAGS_workers), " workers, ", absl::GetFlag(FLAGS_jobs),
                     " jobs each, a pool of ", pool_size, " connections",
                     uncapped ? " (UNCAPPED: no semaphore)" : ""));

    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < absl::GetFlag(FLAGS_workers); ++i) {
      workers.push_back(std::make_unique<Worker>(i, e.loop(), e.Connect(0), pool_size));
      workers.back()->jobs_left = absl::GetFlag(FLAGS_jobs);
    }
    // One job: permit -> INCR (open) -> 100 ms of work -> DECR (close) ->
    // release -> next job.
    std::function<void(Worker*)> next_job;
    auto run_job = [&](Worker* w, std::function<void()> finish) {
      w->transport->Send({"INCR", kOpenKey}, absl::Seconds(2),
                         [&, w, finish](absl::StatusOr<Reply> r) {
        if (!r.ok() || !r->is_integer()) {
          ++failed;
          return finish();
        }
        max_open = std::max(max_open, r->integer);
        e.loop()->RunAfter(absl::Milliseconds(100), [&, w, finish] {
          w->transport->Send({"DECR", kOpenKey}, absl::Seconds(2),
                             [finish](absl::StatusOr<Reply>) { finish(); }).IgnoreError();
        });
      }).IgnoreError();
    };
    next_job = [&](Worker* w) {
      if (w->jobs_left == 0) return;
      --w->jobs_left;
      if (uncapped) {
        run_job(w, [&, w] {
          ++done;
          next_job(w);
        });
        return;
      }
      AcquireOptions o;
      o.ttl = absl::Seconds(5);
      o.wait = absl::Seconds(20);
      auto h = w->waiting.Acquire(kResource, o, [&, w](absl::StatusOr<Lease> permit) {
        if (!permit.ok()) {
          Say(absl::StrCat("worker ", w->id, ": no permit: ", permit.status().ToString()));
          ++failed;
          return next_job(w);
        }
        Lease held = *permit;
        run_job(w, [&, w, held] {
          w->waiting.Release(held, [&, w](absl::Status s) {
            if (!s.ok()) ++failed;
            ++done;
            next_job(w);
          }).IgnoreError();
        });
      });
      if (!h.ok()) {
        ++failed;
        next_job(w);
      }
    };
    for (auto& w : workers) next_job(w.get());
    const int total = absl::GetFlag(FLAGS_workers) * absl::GetFlag(FLAGS_jobs);
    e.RunUntil([&] { return done + failed >= total; }, absl::Seconds(60));
    workers.clear();
    crashed.reset();
  }
  Say(absl::StrCat(done, " jobs done, ", failed, " failed; at most ", max_open,
                   " connections were open at once (pool of ", pool_size, ")"));
  const bool ok = failed == 0 &&
                  done == absl::GetFlag(FLAGS_workers) * absl::GetFlag(FLAGS_jobs) &&
                  max_open <= pool_size &&
                  (uncapped || (crashed_permit_held && max_open == pool_size));
  Say(ok ? "the pool was never exceeded; the crashed worker's permit came back"
         : "UNEXPECTED RESULT: the pool was exceeded or jobs failed");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
