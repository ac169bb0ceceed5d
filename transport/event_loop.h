// This header defines `EventLoop`, the one clock and timer service of dlock.
//
// Every lease computation in dlock reads time from `EventLoop::Now()` and
// schedules work with `RunAfter()`. Nothing else in lock/, watchdog/ or
// redlock/ reads a clock. Implementations:
//   - `UvEventLoop` (//transport/uv): over a host-owned `uv_loop_t*`.
//   - `ManualEventLoop` (//transport/fake): virtual time for tests.
//
// Not thread-safe: call only on the thread that runs the loop. (Threaded
// programs reach a loop through `LoopThread::Post`, see loop_thread.h.)
#ifndef DLOCK_TRANSPORT_EVENT_LOOP_H_
#define DLOCK_TRANSPORT_EVENT_LOOP_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

namespace dlock {

// Identifies a timer; 0 is never a valid id.
using TimerId = uint64_t;

class EventLoop {
 public:
  virtual ~EventLoop() = default;

  // Monotonic time. Only differences are meaningful: the origin is arbitrary
  // (it is not the wall clock, even though the type is `absl::Time`). Never
  // goes backwards, even when the system clock is set back.
  virtual absl::Time Now() const = 0;

  // Runs `callback` once on the loop, no earlier than `delay` from `Now()`.
  // A zero or negative delay means "on a later loop turn": the callback
  // never runs inside this call. Timers due at the same time run in the
  // order they were added.
  virtual TimerId RunAfter(absl::Duration delay,
                           absl::AnyInvocable<void() &&> callback) = 0;

  // Cancels a timer. Returns true if the callback will never run (it is
  // destroyed before Cancel returns); false if it already ran, is running,
  // or the id is unknown.
  virtual bool Cancel(TimerId id) = 0;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_EVENT_LOOP_H_
