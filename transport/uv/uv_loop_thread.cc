#include "dlock/transport/uv/uv_loop_thread.h"

#include <uv.h>

#include <cstdio>
#include <utility>

#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {

struct UvLoopThread::Impl {
  uv_loop_t loop;
  uv_async_t wakeup;  // runs the queue; LoopTurns also kicks the loop with it
  bool loop_closed = false;
};

UvLoopThread::UvLoopThread()
    : impl_(new Impl), turns_(&impl_->loop, &impl_->wakeup) {
  uv_loop_init(&impl_->loop);
  impl_->wakeup.data = this;
  uv_async_init(&impl_->loop, &impl_->wakeup, [](uv_async_t* a) {
    static_cast<UvLoopThread*>(a->data)->RunQueue();
  });
  // Created here, before the thread starts (which orders it before every
  // use on the loop thread); used only on the loop thread from now on.
  event_loop_ = std::make_unique<UvEventLoop>(&impl_->loop);
  thread_ = std::thread([this] {
    turns_.RunBackground();
    // Every handle is closed once the loop is not alive (see Shutdown).
    impl_->loop_closed = uv_loop_close(&impl_->loop) == 0;
  });
}

UvLoopThread::~UvLoopThread() {
  turns_.Stop();
  thread_.join();
  if (!impl_->loop_closed) {
    // A handle was left open on the loop: freeing the loop now would leave
    // it dangling, so leak it and say so.
    std::fprintf(stderr,
                 "dlock::UvLoopThread: loop not closed (a handle is still "
                 "open); leaking it\n");
    impl_.release();
  }
}

EventLoop* UvLoopThread::loop() { return event_loop_.get(); }

uv_loop_s* UvLoopThread::uv_loop() { return &impl_->loop; }

bool UvLoopThread::Post(absl::AnyInvocable<void() &&> fn) {
  MutexLock lock(&turns_.mu());
  if (turns_.stopping()) return false;  // `fn` is destroyed on return
  queue_.push_back(std::move(fn));
  // Under the lock, so the handle cannot be closed meanwhile (see ~). It
  // wakes whoever runs the loop, or the background thread's poll.
  uv_async_send(&impl_->wakeup);
  turns_.WakeParkedBackground();
  return true;
}

bool UvLoopThread::InLoopThread() const { return turns_.InLoopThread(); }

bool UvLoopThread::RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                               absl::FunctionRef<bool()> done) {
  return turns_.RunOnCaller(fn, done);
}

void UvLoopThread::NotifyDone() { turns_.NotifyDone(); }

UvLoopThread::Stats UvLoopThread::stats() const { return turns_.stats(); }

void UvLoopThread::RunQueue() {
  std::deque<absl::AnyInvocable<void() &&>> batch;
  {
    MutexLock lock(&turns_.mu());
    batch.swap(queue_);
  }
  for (auto& fn : batch) std::move(fn)();
  bool more;
  bool stopping;
  {
    MutexLock lock(&turns_.mu());
    more = !queue_.empty();
    stopping = turns_.stopping();
  }
  if (more) {
    // Posted meanwhile: come back on the next loop iteration, so timers and
    // I/O are not starved by functions that keep posting.
    uv_async_send(&impl_->wakeup);
  } else if (stopping) {
    // Nothing posted before the stop is left, and nothing can be posted now.
    Shutdown();
  }
}

void UvLoopThread::Shutdown() {
  event_loop_.reset();
  turns_.ForgetWakeup();
  uv_close(reinterpret_cast<uv_handle_t*>(&impl_->wakeup), nullptr);
}

}  // namespace dlock
