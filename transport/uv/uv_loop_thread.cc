#include "dlock/transport/uv/uv_loop_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {

using Clock = std::chrono::steady_clock;

struct UvLoopThread::Impl {
  uv_loop_t loop;
  uv_async_t wakeup;
  bool async_closed = false;  // guarded by mu_
  bool loop_closed = false;
  // Wakes the background thread out of its poll without touching the loop
  // (whose async handle may be closed by then).
  int wake_fd = -1;
};

UvLoopThread::UvLoopThread() : impl_(new Impl) {
  uv_loop_init(&impl_->loop);
  impl_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  impl_->wakeup.data = this;
  uv_async_init(&impl_->loop, &impl_->wakeup, [](uv_async_t* a) {
    static_cast<UvLoopThread*>(a->data)->RunQueue();
  });
  // Created here, before the thread starts (which orders it before every
  // use on the loop thread); used only on the loop thread from now on.
  event_loop_ = std::make_unique<UvEventLoop>(&impl_->loop);
  {
    MutexLock lock(&mu_);
    background_wakes_ = Clock::time_point::max();
  }
  thread_ = std::thread([this] { Background(); });
}

UvLoopThread::~UvLoopThread() {
  {
    // Wake the loop while holding the lock: the loop can only see
    // `stopping_` (and then close the handle and the loop) after we let go.
    MutexLock lock(&mu_);
    stopping_ = true;
    uv_async_send(&impl_->wakeup);
    WakeBackground();
  }
  thread_.join();
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
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
  MutexLock lock(&mu_);
  if (stopping_) return false;  // `fn` is destroyed on return
  queue_.push_back(std::move(fn));
  // Under the lock, so the handle cannot be closed meanwhile (see ~). It
  // wakes whoever runs the loop, or the background thread's poll.
  uv_async_send(&impl_->wakeup);
  if (background_parked_ && !owned_ && callers_ == 0) background_cv_.Signal();
  return true;
}

bool UvLoopThread::InLoopThread() const {
  return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

UvLoopThread::Stats UvLoopThread::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void UvLoopThread::Own() {
  owned_ = true;
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

void UvLoopThread::Disown() {
  owned_ = false;
  owner_.store(std::thread::id(), std::memory_order_relaxed);
  if (sleeping_callers_ > 0) callers_cv_.SignalAll();
}

Clock::time_point UvLoopThread::NextDue() {
  const int timeout = uv_backend_timeout(&impl_->loop);
  if (timeout < 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(timeout);
}

void UvLoopThread::WakeBackground() {
  if (background_parked_) {
    background_cv_.Signal();
  } else if (background_polling_) {
    const uint64_t one = 1;
    (void)!write(impl_->wake_fd, &one, sizeof(one));
  }
}

void UvLoopThread::WakeBackgroundFor(Clock::time_point due) {
  if (due < background_wakes_) WakeBackground();
}

void UvLoopThread::NotifyDone() {
  // On the loop: the answer may have come in the timer phase of a uv_run
  // that would next block in its poll phase (libuv runs timers first);
  // uv_stop makes that poll return at once.
  if (InLoopThread()) uv_stop(&impl_->loop);
  MutexLock lock(&mu_);
  if (sleeping_callers_ > 0) callers_cv_.SignalAll();
  // Made true off the loop (rare): the caller running the loop may be
  // waiting in it for that answer.
  if (owned_ && !InLoopThread() && !impl_->async_closed) uv_async_send(&impl_->wakeup);
}

bool UvLoopThread::RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                               absl::FunctionRef<bool()> done) {
  uv_loop_t* loop = &impl_->loop;
  mu_.Lock();
  if (stopping_) {
    mu_.Unlock();
    return false;
  }
  ++callers_;
  ++starting_;
  bool kicked = false;
  while (owned_) {
    // Whoever runs the loop hands it over after its current iteration;
    // wake it if it waits in the loop.
    if (!kicked && !impl_->async_closed) {
      uv_async_send(&impl_->wakeup);
      kicked = true;
    }
    ++sleeping_callers_;
    callers_cv_.Wait(&mu_);
    --sleeping_callers_;
  }
  --starting_;
  Own();
  ++stats_.caller_turns;
  mu_.Unlock();
  uv_update_time(loop);
  std::move(fn)();
  fn = nullptr;  // its captures go here, on the loop
  bool owning = true;
  bool dry = false;  // the loop ran dry (shut down): wait for the answer only
  for (;;) {
    if (owning) {
      if (done()) break;
      mu_.Lock();
      const bool hand_over = starting_ > 0;
      mu_.Unlock();
      if (!hand_over && uv_run(loop, UV_RUN_ONCE) != 0) continue;
      // Another caller wants to start a request (or the loop ran dry): give
      // the loop away.
      mu_.Lock();
      if (hand_over) {
        ++stats_.handovers;
      } else {
        dry = true;
      }
      const Clock::time_point due = NextDue();
      Disown();
      WakeBackgroundFor(due);
      owning = false;
    } else {
      mu_.Lock();
    }
    // Another thread runs the loop (or is about to): sleep until our answer
    // came (NotifyDone) or the loop is free for us.
    ++sleeping_callers_;
    bool finished;
    while (!(finished = done()) && (owned_ || starting_ > 0 || dry)) callers_cv_.Wait(&mu_);
    --sleeping_callers_;
    if (finished) {
      mu_.Unlock();
      break;
    }
    Own();
    ++stats_.caller_turns;
    mu_.Unlock();
    uv_update_time(loop);
    owning = true;
  }
  mu_.Lock();
  if (owning) {
    const Clock::time_point due = NextDue();
    Disown();
    WakeBackgroundFor(due);
  }
  --callers_;
  if (callers_ == 0 && stopping_) WakeBackground();
  mu_.Unlock();
  return true;
}

void UvLoopThread::Background() {
  uv_loop_t* loop = &impl_->loop;
  mu_.Lock();
  for (;;) {
    if (!owned_ && callers_ == 0) {
      Own();
      ++stats_.background_turns;
      mu_.Unlock();
      uv_run(loop, UV_RUN_NOWAIT);
      const bool alive = uv_loop_alive(loop) != 0;
      const int timeout = uv_backend_timeout(loop);
      mu_.Lock();
      Disown();
      if (!alive) {
        if (stopping_ && callers_ == 0) break;
        // Shut down while callers are inside: wait for them (below).
      } else if (timeout != 0) {
        background_polling_ = true;
        background_wakes_ = timeout < 0 ? Clock::time_point::max()
                                        : Clock::now() + std::chrono::milliseconds(timeout);
        mu_.Unlock();
        struct pollfd fds[2] = {{uv_backend_fd(loop), POLLIN, 0}, {impl_->wake_fd, POLLIN, 0}};
        (void)poll(fds, 2, timeout);
        if ((fds[1].revents & POLLIN) != 0) {
          uint64_t n;
          (void)!read(impl_->wake_fd, &n, sizeof(n));
        }
        mu_.Lock();
        background_polling_ = false;
        background_wakes_ = Clock::time_point::max();
        if (!owned_ && callers_ == 0) continue;
        ++stats_.background_wakeups_during_callers;
      } else {
        continue;  // more to run now
      }
    }
    // A caller has the loop: keep off it for a while, so that neither its
    // replies nor its next calls wake us, unless a timer falls due earlier
    // (the caller that ends its turn tells us), something is posted or the
    // thread stops.
    background_parked_ = true;
    Clock::time_point deadline = Clock::now() + kParkAfterCaller;
    for (;;) {
      background_wakes_ = deadline;
      background_cv_.WaitUntil(&mu_, deadline);
      if (stopping_ && callers_ == 0) break;
      if (!owned_ && callers_ == 0) break;
      if (Clock::now() >= deadline) {
        ++stats_.background_wakeups_during_callers;
        deadline = Clock::now() + kParkAfterCaller;
      }
      // Else woken while a caller is inside: it runs the loop, timers too.
    }
    background_parked_ = false;
    background_wakes_ = Clock::time_point::max();
  }
  mu_.Unlock();
  // Every handle is closed once the loop is not alive (see Shutdown).
  impl_->loop_closed = uv_loop_close(loop) == 0;
}

void UvLoopThread::RunQueue() {
  std::deque<absl::AnyInvocable<void() &&>> batch;
  {
    MutexLock lock(&mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) std::move(fn)();
  bool more;
  bool stopping;
  {
    MutexLock lock(&mu_);
    more = !queue_.empty();
    stopping = stopping_;
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
  {
    MutexLock lock(&mu_);
    impl_->async_closed = true;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&impl_->wakeup), nullptr);
}

}  // namespace dlock
