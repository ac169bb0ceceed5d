// This header defines `UvLoopThread`, the real `LoopThread`: a thread of its
// own running a libuv loop (which it owns) with a `UvEventLoop` on it.
//
// Other threads hand work to it with `Post`; posted functions run on the loop
// thread in posting order (per posting thread; across threads, in the order
// their Post calls took the queue lock). Objects bound to the loop, such as a
// `HiredisTransport` over `uv_loop()`, are created and used inside posted
// functions.
//
// Shutdown: the destructor stops accepting posts (`Post` returns false from
// then on), runs every function already posted, destroys the UvEventLoop
// (pending timers are dropped without running), closes its own handles,
// waits for the loop to run dry and joins the thread. Objects that keep
// libuv handles on this loop (e.g. a HiredisTransport) must be destroyed
// before, e.g. by a posted function, or by a function the destructor still
// runs; otherwise the loop never runs dry and the destructor blocks.
// Do not destroy a UvLoopThread from its own thread.
//
// This class is thread-safe, except `loop()` and `uv_loop()`, whose results
// may be used only on the loop thread.
#ifndef DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_
#define DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/mutex.h"

struct uv_loop_s;

namespace dlock {

class UvEventLoop;

class UvLoopThread : public LoopThread {
 public:
  // Creates the loop and starts the thread.
  UvLoopThread();
  UvLoopThread(const UvLoopThread&) = delete;
  UvLoopThread& operator=(const UvLoopThread&) = delete;
  ~UvLoopThread() override;

  EventLoop* loop() override;
  bool Post(absl::AnyInvocable<void() &&> fn) override;
  bool InLoopThread() const override;

  // The libuv loop, for loop-bound objects such as HiredisTransport. Use it
  // only on the loop thread.
  uv_loop_s* uv_loop();

 private:
  struct Impl;  // libuv handles
  void RunQueue();
  void Shutdown();

  std::unique_ptr<Impl> impl_;
  std::unique_ptr<UvEventLoop> event_loop_;  // touched only on the loop thread
  Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id loop_thread_id_;
  std::thread thread_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_LOOP_THREAD_H_
