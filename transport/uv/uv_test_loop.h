// This header defines `UvTestLoop`, a libuv loop for tests of //transport/uv
// and of code running on it: it runs the loop until a condition holds, with
// a bounded deadline (never a sleep), and closes the loop, reporting whether
// every handle was closed.
//
// Not thread-safe: use on the test's thread.
#ifndef DLOCK_TRANSPORT_UV_UV_TEST_LOOP_H_
#define DLOCK_TRANSPORT_UV_UV_TEST_LOOP_H_

#include <uv.h>

#include <functional>

#include "absl/time/time.h"

namespace dlock {
namespace testing {

class UvTestLoop {
 public:
  UvTestLoop() {
    uv_loop_init(&loop_);
    uv_timer_init(&loop_, &guard_);
    // The guard never keeps the loop alive on its own.
    uv_unref(reinterpret_cast<uv_handle_t*>(&guard_));
    guard_.data = this;
  }
  UvTestLoop(const UvTestLoop&) = delete;
  UvTestLoop& operator=(const UvTestLoop&) = delete;
  ~UvTestLoop() {
    if (!closed_) Close();
  }

  uv_loop_t* get() { return &loop_; }

  // Runs the loop until `done()` is true or `timeout` passes. Returns
  // whether `done()` became true. Also returns (false) early when nothing
  // is left on the loop that could make `done()` true.
  bool RunUntil(const std::function<bool()>& done,
                absl::Duration timeout = absl::Seconds(10)) {
    expired_ = false;
    uv_timer_start(&guard_, [](uv_timer_t* t) {
      static_cast<UvTestLoop*>(t->data)->expired_ = true;
    }, absl::ToInt64Milliseconds(timeout), 0);
    bool ok = done();
    while (!ok && !expired_) {
      if (!uv_loop_alive(&loop_)) break;
      uv_run(&loop_, UV_RUN_ONCE);
      ok = done();
    }
    uv_timer_stop(&guard_);
    return ok;
  }

  // Runs the loop for `d` of loop time (for "nothing happens" checks).
  void RunFor(absl::Duration d) {
    RunUntil([] { return false; }, d);
  }

  // Runs the loop until no handle is active (bounded by `timeout`), closes
  // it, and returns uv_loop_close's result (0 when nothing leaked).
  int Close(absl::Duration timeout = absl::Seconds(10)) {
    expired_ = false;
    uv_timer_start(&guard_, [](uv_timer_t* t) {
      static_cast<UvTestLoop*>(t->data)->expired_ = true;
    }, absl::ToInt64Milliseconds(timeout), 0);
    while (uv_loop_alive(&loop_) && !expired_) uv_run(&loop_, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&guard_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    closed_ = true;
    return uv_loop_close(&loop_);
  }

 private:
  uv_loop_t loop_;
  uv_timer_t guard_;
  bool expired_ = false;
  bool closed_ = false;
};

}  // namespace testing
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_TEST_LOOP_H_
