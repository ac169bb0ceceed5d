// This header defines `UvEventLoop`, the real `EventLoop`: timers and a
// monotonic clock over a host-owned libuv loop.
//
// Time: `Now()` is `uv_hrtime()` (CLOCK_MONOTONIC, nanoseconds) expressed as
// an `absl::Time` whose origin is arbitrary; only differences mean anything.
//
// Timers: all timers of one UvEventLoop share a single `uv_timer_t`, armed
// for the earliest deadline; pending timers are ordered by (deadline, id),
// so timers due at the same time run in the order they were added. A timer
// added with a zero or negative delay runs on a later loop iteration, never
// inside `RunAfter`. Timers added while due timers are running do not run in
// the same pass, so a callback that re-adds itself cannot starve the loop.
//
// Lifetime: the host owns the `uv_loop_t`, which must outlive this object.
// Destroying a UvEventLoop destroys all pending callbacks without running
// them and closes its handle; once the loop has run again (to deliver the
// close callback) the host may `uv_loop_close()` it with result 0. A
// UvEventLoop may be destroyed from inside one of its own callbacks.
//
// Not thread-safe: call only on the thread running `loop`.
#ifndef DLOCK_TRANSPORT_UV_UV_EVENT_LOOP_H_
#define DLOCK_TRANSPORT_UV_UV_EVENT_LOOP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

struct uv_loop_s;

namespace dlock {

class UvEventLoop : public EventLoop {
 public:
  // `loop` must be initialized and outlive this object.
  explicit UvEventLoop(uv_loop_s* loop);
  UvEventLoop(const UvEventLoop&) = delete;
  UvEventLoop& operator=(const UvEventLoop&) = delete;
  ~UvEventLoop() override;

  absl::Time Now() const override;
  TimerId RunAfter(absl::Duration delay,
                   absl::AnyInvocable<void() &&> callback) override;
  bool Cancel(TimerId id) override;

  uv_loop_s* uv_loop() const { return loop_; }
  // Number of timers that have neither run nor been cancelled.
  size_t pending_timers() const { return queue_.size(); }

 private:
  struct Handle;  // heap-allocated uv_timer_t, freed by its close callback
  using Key = std::pair<int64_t, TimerId>;  // (deadline ns, id)

  static void OnUvTimer(void* self);
  void RunDue();
  void Arm();

  uv_loop_s* const loop_;
  Handle* handle_;
  std::map<Key, absl::AnyInvocable<void() &&>> queue_;
  absl::flat_hash_map<TimerId, int64_t> deadline_of_;
  TimerId next_id_ = 1;
  // Set by the destructor when it runs inside RunDue().
  bool* destroyed_ = nullptr;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_EVENT_LOOP_H_
