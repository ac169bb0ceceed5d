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
// `LoopTurns` (loop_turns.h) implements this protocol; this class owns the
// loop, the thread and the post queue.
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

#include <chrono>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/uv/loop_turns.h"

struct uv_loop_s;

namespace dlock {

class UvEventLoop;

// Owns the libuv loop, its async wake-up handle, the UvEventLoop on it, the
// post queue and the background thread; who runs the loop when is `turns_`'s
// business (LoopTurns, loop_turns.h), whose lock also guards the queue.
class UvLoopThread : public LoopThread {
 public:
  // How long the background thread keeps off the loop after it saw a caller
  // run it (see the header comment).
  static constexpr std::chrono::milliseconds kParkAfterCaller =
      LoopTurns::kParkAfterCaller;

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
  using Stats = LoopTurns::Stats;
  Stats stats() const;

 private:
  struct Impl;  // libuv handles
  void RunQueue();
  void Shutdown();

  std::unique_ptr<Impl> impl_;
  std::unique_ptr<UvEventLoop> event_loop_;  // touched only on the loop thread
  LoopTurns turns_;  // over impl_'s loop and async handle
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(turns_.mu());
  std::thread thread_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_
