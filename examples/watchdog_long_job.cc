// The watchdog keeps a long job's lock alive, and tells the job to stop when
// the lock is lost. The lease TTL is 1 s, the job takes 3 s: without renewal
// the lock would expire under the job. The Watchdog renews it on the loop's
// timers (every ttl/3), and the job checks nothing but its `on_lost`.
// Part 2: the same, but halfway through someone deletes the lock key (as an
// eviction or an operator would); the next renewal is refused, `on_lost`
// fires, and the job stops before finishing its work.
//
//   bazel run //examples:watchdog_long_job [-- --redis=redis://127.0.0.1:6379]
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/watchdog/watchdog.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");

namespace dlock {
namespace examples {
namespace {

// Runs a job of `steps` steps of 100 ms under a watched lease. When
// `sabotage_after` steps are done, deletes the lock key from another
// connection. Returns the number of steps completed; *lost says whether the
// job was told to stop.
int RunJob(ExampleEnv& e, const std::string& resource, int steps, int sabotage_after,
           bool* lost) {
  TextLockObserver observer([](absl::string_view line) { Say(absl::StrCat("  ", line)); });
  auto conn = e.Connect(0);
  auto other = e.Connect(0);
  SimpleLockOptions so;
  so.observer = &observer;
  SimpleLock lock(e.loop(), conn.get(), so);
  WatchdogOptions wo;
  wo.observer = &observer;
  Watchdog watchdog(e.loop(), &lock, wo);

  int done_steps = 0;
  bool finished = false;
  *lost = false;
  WatchHandle watch;
  TimerId step_timer = 0;
  std::function<void()> step;
  step = [&] {
    step_timer = 0;
    if (*lost) return;
    ++done_steps;
    if (done_steps == sabotage_after) {
      Say("  (someone deletes the lock key)");
      other->Send({"DEL", absl::StrCat("dlock:{", resource, "}")}, absl::Seconds(2),
                  [](absl::StatusOr<Reply>) {}).IgnoreError();
    }
    if (done_steps == steps) {
      Say(absl::StrCat("job finished all ", steps, " steps; releasing"));
      watch.Release([&](absl::Status s) {
        Say(absl::StrCat("released: ", s.ok() ? "OK" : s.ToString()));
        finished = true;
      }).IgnoreError();
      return;
    }
    step_timer = e.loop()->RunAfter(absl::Milliseconds(100), step);
  };

  AcquireOptions ao;
  ao.ttl = absl::Seconds(1);
  bool acquired = false;
  auto h = lock.Acquire(resource, ao, [&](absl::StatusOr<Lease> lease) {
    if (!lease.ok()) {
      Say(absl::StrCat("cannot lock: ", lease.status().ToString()));
      finished = true;
      return;
    }
    acquired = true;
    WatchOptions w;
    w.on_lost = [&](absl::Status why) {
      *lost = true;
      Say(absl::StrCat("job told to stop after ", done_steps, " steps: lock lost (",
                       why.ToString(), ")"));
      if (step_timer != 0) e.loop()->Cancel(step_timer);
      step_timer = 0;
      finished = true;
    };
    absl::StatusOr<WatchHandle> wh = watchdog.Watch(*lease, std::move(w));
    if (!wh.ok()) {
      Say(wh.status().ToString());
      finished = true;
      return;
    }
    watch = *std::move(wh);
    Say(absl::StrCat("job starts: ", steps, " steps of 100ms under a 1s lease"));
    step_timer = e.loop()->RunAfter(absl::Milliseconds(100), step);
  });
  if (!h.ok()) return 0;
  e.RunUntil([&] { return finished; }, absl::Seconds(30));
  if (step_timer != 0) e.loop()->Cancel(step_timer);
  return acquired ? done_steps : 0;
}

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  bool lost = false;
  Say("part 1: a 3 s job under a 1 s lease");
  int steps = RunJob(**env, "long-job", 30, -1, &lost);
  bool ok = steps == 30 && !lost;
  Say("part 2: the lock is taken away mid-job");
  steps = RunJob(**env, "long-job-2", 30, 10, &lost);
  ok = ok && lost && steps < 30;
  Say(ok ? "the watchdog kept the lease alive, and reported its loss"
         : "UNEXPECTED RESULT");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
