// This header defines `LoopThread`: an event loop running on a thread of its
// own, which other threads hand work to. The blocking facade of //lock is
// built on it, so threaded programs use the same async core as loop hosts.
//
// Implementation: `UvLoopThread` (//transport/uv).
//
// Caller turns (optional; `UvLoopThread` has them, the default has not): a
// thread that wants an answer from the loop can run the loop itself instead
// of handing the work over and sleeping (`RunOnCaller`). While it does, it
// IS the loop thread: `InLoopThread()` is true on it, and whatever the loop
// runs meanwhile (other callers' callbacks, timers, posted functions) runs
// on it. "The loop thread" below means whichever thread runs the loop at
// that moment; at most one does.
//
// This class is thread-safe, except `loop()`, whose result may be used only
// on the loop thread (inside a posted function or a caller turn).
#ifndef DLOCK_TRANSPORT_LOOP_THREAD_H_
#define DLOCK_TRANSPORT_LOOP_THREAD_H_

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

class LoopThread {
 public:
  virtual ~LoopThread() = default;

  // The loop. Use it only on the loop thread.
  virtual EventLoop* loop() = 0;

  // Runs `fn` on the loop thread soon, in posting order. Returns false (and
  // destroys `fn` without running it) once the thread is stopping.
  virtual bool Post(absl::AnyInvocable<void() &&> fn) = 0;

  // True when called on the loop thread (the thread running the loop now).
  virtual bool InLoopThread() const = 0;

  // Caller turn: runs `fn` on the loop from the calling thread, then runs
  // the loop on it until `done()` is true (or, while another thread runs
  // the loop, sleeps until `done()` is true or the loop is free), and
  // returns true. `done` is called without any lock of the caller's held;
  // whoever makes it true (on any thread, the loop included) must then call
  // `NotifyDone()`. Returns false, leaving `fn` untouched, when this
  // loop thread has no caller turns (the default) or is stopping: use
  // `Post` then. Never call it on the loop thread.
  virtual bool RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                           absl::FunctionRef<bool()> done) {
    (void)fn;
    (void)done;
    return false;
  }

  // Wakes the callers sleeping in `RunOnCaller` so that they check
  // `done()` again. Cheap when nobody sleeps. Thread-safe.
  virtual void NotifyDone() {}
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_LOOP_THREAD_H_
