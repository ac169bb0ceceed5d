// This header defines `LoopTurns`, the loop-ownership protocol of
// `UvLoopThread`: which thread runs a libuv loop at any moment. Threads inside
// a blocking call take caller turns (`RunOnCaller`); a background thread
// (`RunBackground`) takes the loop only while no caller is inside.
//
// At most one thread owns (runs) the loop at a time. A caller takes the loop,
// runs its function and then the loop (`uv_run` UV_RUN_ONCE) on its own
// thread until `done()`, and gives the loop back. A caller that wants to
// start while another thread owns the loop kicks it (the `wakeup` async
// handle) and sleeps; the owner hands the loop over after its current
// iteration and sleeps until its own answer came (`NotifyDone`; run by
// whoever has the loop then) or the loop is free.
//
// The background thread runs the loop without blocking (UV_RUN_NOWAIT) and
// between its turns waits outside the loop (BackgroundWait,
// background_wait.h: a poll on the loop's backend fd and an eventfd). When it
// finds a caller on the loop it parks for up to `kParkAfterCaller`, or until
// a caller ending its turn sees a timer due earlier, something is posted
// (`WakeParkedBackground`) or `Stop`.
//
// Owns: the lock (`mu()`), the ownership state, the callers' condition
// variable, the background thread's wait (BackgroundWait) and the counters.
// The owner of a LoopTurns may guard state of its own with `mu()` when it
// must change together with `stopping()` (UvLoopThread's post queue). Does
// not own the loop or the async handle (whose callback is the owner's): both
// must outlive it.
//
// Thread-safety: thread-safe, with these rules: `RunBackground` runs once, on
// the background thread; `RunOnCaller` is never called on the thread that
// owns the loop; `ForgetWakeup` runs on the loop.
#ifndef DLOCK_TRANSPORT_UV_LOOP_TURNS_H_
#define DLOCK_TRANSPORT_UV_LOOP_TURNS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "dlock/transport/mutex.h"
#include "dlock/transport/uv/background_wait.h"

struct uv_async_s;
struct uv_loop_s;

namespace dlock {

class LoopTurns {
 public:
  // How long the background thread keeps off the loop after it saw a caller
  // run it.
  static constexpr std::chrono::milliseconds kParkAfterCaller{2};

  // Counters for tests and profiles: turns the background thread took, and
  // times it woke (from poll or park) to find a caller on the loop.
  struct Stats {
    uint64_t background_turns = 0;
    uint64_t background_wakeups_during_callers = 0;
    uint64_t caller_turns = 0;
    uint64_t handovers = 0;
  };

  // `wakeup` is an async handle on `loop`; both must outlive this object.
  LoopTurns(uv_loop_s* loop, uv_async_s* wakeup);
  LoopTurns(const LoopTurns&) = delete;
  LoopTurns& operator=(const LoopTurns&) = delete;
  ~LoopTurns();

  Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  bool stopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; }
  // Refuses caller turns from now on; wakes the loop's owner and the
  // background thread, so that they see it.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // After a post: wakes the background thread if it parks and nobody runs
  // the loop.
  void WakeParkedBackground() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On the loop, before `wakeup` is closed: never send it from now on.
  void ForgetWakeup() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the calling thread runs the loop now.
  bool InLoopThread() const {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  // LoopThread::RunOnCaller and LoopThread::NotifyDone (loop_thread.h).
  bool RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                   absl::FunctionRef<bool()> done) ABSL_LOCKS_EXCLUDED(mu_);
  void NotifyDone() ABSL_LOCKS_EXCLUDED(mu_);
  // The background thread's turns; returns once stopping, the loop ran dry
  // and no caller is inside.
  void RunBackground() ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Takes the loop for the calling thread, or gives it back.
  void Own() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Disown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Owner only, before giving the loop back: when the next timer is due.
  std::chrono::steady_clock::time_point NextDue();

  uv_loop_s* const loop_;
  uv_async_s* const wakeup_;
  mutable Mutex mu_;
  CondVar callers_cv_;  // callers waiting for the loop or their answer
  BackgroundWait background_;  // its methods need mu_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wakeup_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool owned_ ABSL_GUARDED_BY(mu_) = false;   // some thread runs the loop
  int starting_ ABSL_GUARDED_BY(mu_) = 0;     // callers waiting to start
  int callers_ ABSL_GUARDED_BY(mu_) = 0;      // callers inside RunOnCaller
  int sleeping_callers_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // The thread running the loop now (default id: none). Each thread only
  // ever compares it with its own id, which it alone writes.
  std::atomic<std::thread::id> owner_{};
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_LOOP_TURNS_H_
