// This header defines `LoopThread`: an event loop running on a thread of its
// own, which other threads hand work to. The blocking facade of //lock is
// built on it, so threaded programs use the same async core as loop hosts.
//
// Implementation: `UvLoopThread` (//transport/uv).
//
// This class is thread-safe, except `loop()`, whose result may be used only
// on the loop thread (inside a posted function).
#ifndef DLOCK_TRANSPORT_LOOP_THREAD_H_
#define DLOCK_TRANSPORT_LOOP_THREAD_H_

#include "absl/functional/any_invocable.h"
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

  // True when called on the loop thread.
  virtual bool InLoopThread() const = 0;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_LOOP_THREAD_H_
