// This header defines `ManualEventLoop`, an `EventLoop` whose clock moves only
// when a test moves it: virtual time for deterministic, sleep-free tests.
//
//   ManualEventLoop loop;
//   loop.RunAfter(absl::Seconds(1), [] { ... });
//   loop.RunUntilIdle();                 // runs nothing: not due yet
//   loop.AdvanceTime(absl::Seconds(1));  // runs it, Now() moved by 1 s
//
// Semantics:
//   - `Now()` starts at `kOrigin` and never moves on its own; only
//     `AdvanceTime()` / `AdvanceTo()` move it, and never backwards.
//   - A timer added with delay d is due at Now() + max(d, 0). Due timers run
//     in deadline order; timers with equal deadlines run in the order they
//     were added (every timer id is larger than all earlier ones).
//   - While a timer runs, `Now()` equals its deadline (so a callback sees the
//     time it was scheduled for), and timers it adds that fall within the
//     window being advanced run in the same call.
//   - No callback ever runs inside `RunAfter()` or `Cancel()`.
//   - Destroying the loop destroys pending callbacks without running them.
//
// Not thread-safe: call only from one thread (the test's). Callbacks may call
// any method of the loop, including `AdvanceTime()`/`RunUntilIdle()`
// re-entrantly (the nested call runs what is due; the outer call continues
// afterwards).
#ifndef DLOCK_TRANSPORT_FAKE_MANUAL_EVENT_LOOP_H_
#define DLOCK_TRANSPORT_FAKE_MANUAL_EVENT_LOOP_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

class ManualEventLoop : public EventLoop {
 public:
  // Where `Now()` starts: an arbitrary fixed instant (2001-09-09 01:46:40 UTC,
  // Unix time 1e9), deliberately not the Unix epoch, so code that wrongly
  // treats a monotonic instant as "zero" shows up in tests.
  static constexpr int64_t kOriginUnixSeconds = 1000000000;
  static absl::Time Origin() { return absl::FromUnixSeconds(kOriginUnixSeconds); }

  ManualEventLoop();
  ~ManualEventLoop() override;

  ManualEventLoop(const ManualEventLoop&) = delete;
  ManualEventLoop& operator=(const ManualEventLoop&) = delete;

  // EventLoop.
  absl::Time Now() const override { return now_; }
  TimerId RunAfter(absl::Duration delay,
                   absl::AnyInvocable<void() &&> callback) override;
  bool Cancel(TimerId id) override;

  // Moves the clock forward by `d` (a negative `d` counts as zero), running
  // every timer due by the new time in deadline order, including timers the
  // callbacks add within the window. Returns how many callbacks ran.
  size_t AdvanceTime(absl::Duration d);

  // Like AdvanceTime(target - Now()); does nothing to the clock if `target`
  // is in the past (but still runs what is due now).
  size_t AdvanceTo(absl::Time target);

  // Runs every timer due at the current time (zero-delay work, and work that
  // it posts with zero delay), without moving the clock. Returns how many
  // callbacks ran. A callback that keeps re-posting itself with zero delay
  // makes this never return, as with any "run until idle".
  size_t RunUntilIdle();

  // Advances to the earliest pending timer and runs everything due then.
  // Returns false (clock unchanged) when no timer is pending.
  bool RunNext();

  // Number of timers not yet run or cancelled.
  size_t pending() const { return timers_.size(); }
  // Deadline of the earliest pending timer, or absl::InfiniteFuture().
  absl::Time NextDeadline() const;

 private:
  using Key = std::pair<absl::Time, TimerId>;  // (deadline, insertion order)

  // Runs the earliest timer due at or before `limit`, if any.
  bool RunOneDue(absl::Time limit);

  absl::Time now_;
  TimerId next_id_ = 1;
  std::map<Key, absl::AnyInvocable<void() &&>> timers_;
  absl::flat_hash_map<TimerId, absl::Time> deadlines_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_MANUAL_EVENT_LOOP_H_
