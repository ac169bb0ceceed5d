#include "dlock/transport/uv/loop_turns.h"

#include <uv.h>

#include <utility>

namespace dlock {

using Clock = std::chrono::steady_clock;

LoopTurns::LoopTurns(uv_loop_s* loop, uv_async_s* wakeup)
    : loop_(loop), wakeup_(wakeup) {}

LoopTurns::~LoopTurns() = default;

void LoopTurns::Stop() {
  // Wake the loop while holding the lock: the loop can only see `stopping_`
  // (and then close the handle and the loop) after we let go.
  MutexLock lock(&mu_);
  stopping_ = true;
  uv_async_send(wakeup_);
  background_.Wake(&mu_);
}

void LoopTurns::WakeParkedBackground() {
  if (!owned_ && callers_ == 0) background_.WakeIfParked(&mu_);
}

void LoopTurns::ForgetWakeup() {
  MutexLock lock(&mu_);
  wakeup_closed_ = true;
}

LoopTurns::Stats LoopTurns::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void LoopTurns::Own() {
  owned_ = true;
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

void LoopTurns::Disown() {
  owned_ = false;
  owner_.store(std::thread::id(), std::memory_order_relaxed);
  if (sleeping_callers_ > 0) callers_cv_.SignalAll();
}

Clock::time_point LoopTurns::NextDue() {
  const int timeout = uv_backend_timeout(loop_);
  if (timeout < 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(timeout);
}

void LoopTurns::NotifyDone() {
  // On the loop: the answer may have come in the timer phase of a uv_run
  // that would next block in its poll phase (libuv runs timers first);
  // uv_stop makes that poll return at once.
  if (InLoopThread()) uv_stop(loop_);
  MutexLock lock(&mu_);
  if (sleeping_callers_ > 0) callers_cv_.SignalAll();
  // Made true off the loop (rare): the caller running the loop may be
  // waiting in it for that answer.
  if (owned_ && !InLoopThread() && !wakeup_closed_) uv_async_send(wakeup_);
}

bool LoopTurns::RunOnCaller(absl::AnyInvocable<void() &&>& fn,
                            absl::FunctionRef<bool()> done) {
  uv_loop_t* loop = loop_;
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
    if (!kicked && !wakeup_closed_) {
      uv_async_send(wakeup_);
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
      background_.WakeFor(&mu_, due);
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
    background_.WakeFor(&mu_, due);
  }
  --callers_;
  if (callers_ == 0 && stopping_) background_.Wake(&mu_);
  mu_.Unlock();
  return true;
}

void LoopTurns::RunBackground() {
  uv_loop_t* loop = loop_;
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
        background_.Poll(&mu_, loop, timeout);
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
    background_.Park(&mu_);
    Clock::time_point deadline = Clock::now() + kParkAfterCaller;
    for (;;) {
      background_.WaitUntil(&mu_, deadline);
      if (stopping_ && callers_ == 0) break;
      if (!owned_ && callers_ == 0) break;
      if (Clock::now() >= deadline) {
        ++stats_.background_wakeups_during_callers;
        deadline = Clock::now() + kParkAfterCaller;
      }
      // Else woken while a caller is inside: it runs the loop, timers too.
    }
    background_.Unpark(&mu_);
  }
  mu_.Unlock();
}

}  // namespace dlock
