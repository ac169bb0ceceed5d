// This header defines `UvLoopThread`, the real `LoopThread`: a libuv loop
// (which it owns) with a `UvEventLoop` on it, run by a background thread of
// its own and, during caller turns, by the threads that wait for it.
//
// Other threads hand work to it with `Post`; posted functions run on the loop
// thread in posting order (per posting thread; across threads, in the order
// their Post calls took the queue lock). Objects bound to the loop, such as a
// `HiredisTransport` over `uv_loop()`, are created and used inside posted
// functions or caller turns.
//
// Caller turns (`RunOnCaller`, see loop_thread.h): the loop is owned by at
// most one thread at a time. A caller that wants an answer takes the loop,
// runs its function and then the loop (`uv_run` UV_RUN_ONCE) on its own
// thread until its answer came, and gives the loop back -- no hand-off to
// another thread and no wake-up on the common path of one thread making
// blocking calls. Several callers: one that wants to start a request while
// another runs the loop wakes the loop (uv_async_send); the runner hands
// the loop over after its current iteration and sleeps until its own
// answer came (run by whoever has the loop then) or the loop is free.
//
// The background thread owns the loop only when no caller does. Between its
// turns it waits outside the loop for I/O readiness or the next timer
// (poll on `uv_backend_fd` with `uv_backend_timeout`: libuv's way to embed a
// loop). When a caller takes the loop while it polls, the first event wakes
// it; it then parks for up to `kParkAfterCaller` (or until the next timer is
// due, or a Post), so that back-to-back calls are not slowed by it. Hence:
// timers (watchdog renewals, deadlines) and posted functions run on time
// whether or not a caller is inside a call; I/O that arrives while no caller
// is inside a call (a renewal's reply, a release notification nobody waits
// for) is handled within `kParkAfterCaller` of the last call's end.
//
// Shutdown: the destructor stops accepting posts and caller turns (`Post` and
// `RunOnCaller` return false from then on), runs every function already
// posted, destroys the UvEventLoop (pending timers are dropped without
// running), closes its own handles, waits for the loop to run dry and for
// every caller turn to end, and joins the thread. Objects that keep libuv
// handles on this loop (e.g. a HiredisTransport) must be destroyed before,
// e.g. by a posted function, or by a function the destructor still runs;
// otherwise the loop never runs dry and the destructor blocks. Do not
// destroy a UvLoopThread from its own thread.
//
// This class is thread-safe, except `loop()` and `uv_loop()`, whose results
// may be used only on the loop thread.
#ifndef DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_
#define DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/mutex.h"

struct uv_loop_s;

namespace dlock {

class UvEventLoop;

class UvLoopThread : public LoopThread {
 public:
  // How long the background thread keeps off the loop after it saw a caller
  // run it (see the header comment).
  static constexpr std::chrono::milliseconds kParkAfterCaller{2};

  // Creates the loop and starts the background thread.
  UvLoopThread();
  UvLoopThread(const UvLoopThread&) = delete;
  UvLoopThread& operator=(const UvLoopThread&) = delete;
  ~UvLoopThread() override;

  EventLoop* loop() override;
  bool Post(absl::AnyInvocable<void() &&> fn) override;
  bool InLoopThread() const override;
  bool RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                   absl::FunctionRef<bool()> done) override;
  void NotifyDone() override;

  // The libuv loop, for loop-bound objects such as HiredisTransport. Use it
  // only on the loop thread.
  uv_loop_s* uv_loop();

  // Counters for tests and profiles: turns the background thread took, and
  // times it woke (from poll or park) to find a caller on the loop.
  struct Stats {
    uint64_t background_turns = 0;
    uint64_t background_wakeups_during_callers = 0;
    uint64_t caller_turns = 0;
    uint64_t handovers = 0;
  };
  Stats stats() const;

 private:
  struct Impl;  // libuv handles
  void RunQueue();
  void Shutdown();
  void Background();
  // Takes the loop for the calling thread (mu_ held).
  void Own() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Disown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Owner only, before giving the loop back: when the next timer is due.
  std::chrono::steady_clock::time_point NextDue();
  // Wakes the background thread out of its park or poll (mu_ held).
  void WakeBackground() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the background thread if it sleeps past `due` (mu_ held).
  void WakeBackgroundFor(std::chrono::steady_clock::time_point due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<Impl> impl_;
  std::unique_ptr<UvEventLoop> event_loop_;  // touched only on the loop thread
  mutable Mutex mu_;
  CondVar callers_cv_;     // callers waiting for the loop or their answer
  CondVar background_cv_;  // the background thread, parked
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool owned_ ABSL_GUARDED_BY(mu_) = false;   // some thread runs the loop
  int starting_ ABSL_GUARDED_BY(mu_) = 0;     // callers waiting to start
  int callers_ ABSL_GUARDED_BY(mu_) = 0;      // callers inside RunOnCaller
  int sleeping_callers_ ABSL_GUARDED_BY(mu_) = 0;
  // When the background thread wakes up by itself (poll timeout or park
  // deadline); max() while it runs.
  std::chrono::steady_clock::time_point background_wakes_ ABSL_GUARDED_BY(mu_);
  bool background_parked_ ABSL_GUARDED_BY(mu_) = false;
  bool background_polling_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // The thread running the loop now (default id: none). Each thread only
  // ever compares it with its own id, which it alone writes.
  std::atomic<std::thread::id> owner_{};
  std::thread thread_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_
