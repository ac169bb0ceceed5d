// This header defines `StallableLoop`, a test `EventLoop` over a
// `ManualEventLoop` whose clock can jump ahead of its timers: `Stall(d)`
// makes Now() d later without running anything, so every timer pending
// then fires d late, as after a real stall (a blocked loop thread, a
// suspended process, a long GC pause of a host). Anything that reads the
// clock through this loop (e.g. a FakeRedis built on it) sees the jump too.
//
//   StallableLoop loop;
//   loop.inner().AdvanceTime(absl::Seconds(1));  // normal virtual time
//   loop.Stall(absl::Seconds(5));                // Now() jumps by 5 s
//   loop.inner().RunUntilIdle();                 // ...timers still at their
//   loop.inner().AdvanceTime(...);               // inner deadlines fire late
//
// Not thread-safe: use on the test's thread.
#ifndef DLOCK_WATCHDOG_STALLABLE_LOOP_H_
#define DLOCK_WATCHDOG_STALLABLE_LOOP_H_

#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace test_support {

class StallableLoop : public EventLoop {
 public:
  absl::Time Now() const override { return inner_.Now() + skew_; }
  TimerId RunAfter(absl::Duration delay,
                   absl::AnyInvocable<void() &&> callback) override {
    return inner_.RunAfter(delay, std::move(callback));
  }
  bool Cancel(TimerId id) override { return inner_.Cancel(id); }

  // Now() jumps forward by `d`; pending timers keep their place on the
  // inner clock, so each fires `d` late.
  void Stall(absl::Duration d) { skew_ += d; }

  // Advances virtual time (runs what falls due).
  void Advance(absl::Duration d) { inner_.AdvanceTime(d); }

  ManualEventLoop& inner() { return inner_; }

 private:
  ManualEventLoop inner_;
  absl::Duration skew_;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_WATCHDOG_STALLABLE_LOOP_H_
