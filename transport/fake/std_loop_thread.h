// This header defines `StdLoopThread`: a `LoopThread` (loop_thread.h) on a
// std::thread, with an `EventLoop` of its own on the steady clock -- no
// libuv. It carries what a unit test of a threaded component needs (a
// BlockingClient or BlockingLock over FakeTransports, say) without linking
// a network stack. Transports that need a libuv loop (HiredisTransport,
// UvTransport) need a UvLoopThread instead.
//
// Posted functions run on the loop thread in posting order (across
// threads, in the order their Post calls took the queue lock); timers run
// no earlier than their delay, those due at the same time in the order they
// were added; a timer never runs inside the RunAfter call that added it.
//
// Shutdown: the destructor stops accepting posts (`Post` returns false from
// then on), runs every function already posted, drops the pending timers
// without running them (their callbacks are destroyed on the loop thread)
// and joins the thread. Do not destroy a StdLoopThread from its own thread.
//
// This class is thread-safe, except `loop()`, whose result may be used only
// on the loop thread (inside a posted function).
#ifndef DLOCK_TRANSPORT_FAKE_STD_LOOP_THREAD_H_
#define DLOCK_TRANSPORT_FAKE_STD_LOOP_THREAD_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/loop_thread.h"

namespace dlock {

class StdLoopThread : public LoopThread {
 public:
  // Starts the thread.
  StdLoopThread();
  StdLoopThread(const StdLoopThread&) = delete;
  StdLoopThread& operator=(const StdLoopThread&) = delete;
  ~StdLoopThread() override;

  EventLoop* loop() override;
  bool Post(absl::AnyInvocable<void() &&> fn) override;
  bool InLoopThread() const override;

 private:
  class Timers;  // the EventLoop; used only on the loop thread

  void Run();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<absl::AnyInvocable<void() &&>> posted_;  // guarded by mu_
  bool stopping_ = false;                              // guarded by mu_
  std::thread::id loop_id_;                            // guarded by mu_
  std::unique_ptr<Timers> timers_;
  std::thread thread_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_STD_LOOP_THREAD_H_
