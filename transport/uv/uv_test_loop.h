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
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace test_support {

class UvTestLoop {
 public:
  UvTestLoop() {
    uv_loop_init(&loop_);
    uv_timer_init(&loop_, &guard_);
    // The guard never keeps the loop alive on its own.
    uv_unref(reinterpret_cast<uv_handle_t*>(&guard_));
    guard_.data = this;
    // Checks the condition just before the loop would block in poll: a
    // timer callback that made it true must not leave us waiting for I/O.
    uv_prepare_init(&loop_, &check_);
    uv_unref(reinterpret_cast<uv_handle_t*>(&check_));
    check_.data = this;
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
    done_ = &done;
    uv_prepare_start(&check_, [](uv_prepare_t* p) {
      UvTestLoop* self = static_cast<UvTestLoop*>(p->data);
      if ((*self->done_)()) uv_stop(&self->loop_);
    });
    bool ok = done();
    while (!ok && !expired_) {
      if (!uv_loop_alive(&loop_)) break;
      uv_run(&loop_, UV_RUN_ONCE);
      ok = done();
    }
    uv_prepare_stop(&check_);
    uv_timer_stop(&guard_);
    done_ = nullptr;
    return ok;
  }

  // Asks `transport` to connect (Transport::Connect) and runs the loop until
  // it answers, bounded by `timeout`: the answer, the call's rejection, or
  // kDeadlineExceeded. What test environments do before handing a client to
  // a test, so the test measures lock behaviour, not connects.
  absl::Status ConnectAndWait(Transport& transport,
                              absl::Duration timeout = absl::Seconds(10)) {
    std::optional<absl::Status> answer;
    absl::Status call = transport.Connect([&answer](absl::Status s) { answer = s; });
    if (!call.ok()) return call;
    if (!RunUntil([&answer] { return answer.has_value(); }, timeout)) {
      return absl::DeadlineExceededError("transport did not connect in time");
    }
    return *answer;
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
    uv_close(reinterpret_cast<uv_handle_t*>(&check_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    closed_ = true;
    return uv_loop_close(&loop_);
  }

 private:
  uv_loop_t loop_;
  uv_timer_t guard_;
  uv_prepare_t check_;
  const std::function<bool()>* done_ = nullptr;
  bool expired_ = false;
  bool closed_ = false;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_TEST_LOOP_H_
