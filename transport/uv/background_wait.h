// This header defines `BackgroundWait`: where the background thread of a
// `LoopTurns` (loop_turns.h) waits between its turns on a libuv loop, and how
// other threads wake it from there.
//
// It waits in one of two ways. Polling (`Poll`): outside the loop, for I/O
// readiness or the next timer (`poll` on `uv_backend_fd` with
// `uv_backend_timeout`: libuv's way to embed a loop) plus an eventfd of its
// own, which wakes it without touching the loop (whose async handle may be
// closed by then). Parked (`Park` ... `Unpark`): on a condition variable,
// while a caller runs the loop. `Wake` ends either; `WakeFor` only when the
// thread would otherwise sleep past a given time.
//
// Owns the eventfd, the condition variable and the state of the wait (how it
// waits, until when). Not thread-safe by itself: every method must be called
// with the LoopTurns lock held, passed as `mu` (Poll and WaitUntil release it
// while they wait). Poll, Park, WaitUntil and Unpark are the background
// thread's; Wake, WakeFor and WakeIfParked any thread's.
#ifndef DLOCK_TRANSPORT_UV_BACKGROUND_WAIT_H_
#define DLOCK_TRANSPORT_UV_BACKGROUND_WAIT_H_

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "dlock/transport/mutex.h"

struct uv_loop_s;

namespace dlock {

class BackgroundWait {
 public:
  BackgroundWait();  // creates the eventfd
  BackgroundWait(const BackgroundWait&) = delete;
  BackgroundWait& operator=(const BackgroundWait&) = delete;
  ~BackgroundWait();

  // Waits for I/O on `loop` or `Wake` for up to `timeout` ms (< 0: no limit).
  void Poll(Mutex* mu, uv_loop_s* loop, int timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Parked from Park to Unpark; WaitUntil sleeps until `deadline` or `Wake`.
  void Park(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Unpark(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Wakes the thread out of its park or poll.
  void Wake(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Wakes it if it sleeps past `due`.
  void WakeFor(Mutex* mu, std::chrono::steady_clock::time_point due)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void WakeIfParked(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 private:
  int wake_fd_ = -1;
  CondVar cv_;  // parked
  bool parked_ = false;
  bool polling_ = false;
  // When the thread wakes up by itself (poll timeout or park deadline);
  // max() while it runs.
  std::chrono::steady_clock::time_point wakes_ =
      std::chrono::steady_clock::time_point::max();
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_BACKGROUND_WAIT_H_
