// Internal to //transport/uv: `DeferredQueue<Event>`, how HiredisTransport
// and TlsTransport keep "never call back inside the call that made the
// request": a failure, a confirmation or a message is queued and handed to
// the owner's `deliver` function on a later loop turn, by one zero-delay
// timer for the whole queue. A drain takes only what was queued when it
// began, so a callback that queues more cannot starve the loop.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_DEFERRED_QUEUE_H_
#define DLOCK_TRANSPORT_UV_DEFERRED_QUEUE_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

template <typename Event>
class DeferredQueue {
 public:
  // `deliver` gets each event in order, on the loop; it may destroy the
  // queue's owner (and so the queue): the drain then stops. `loop` must
  // outlive the queue.
  DeferredQueue(EventLoop* loop, absl::AnyInvocable<void(Event&&)> deliver)
      : loop_(loop), deliver_(std::move(deliver)) {}
  DeferredQueue(const DeferredQueue&) = delete;
  DeferredQueue& operator=(const DeferredQueue&) = delete;
  ~DeferredQueue() { StopTimer(); }

  // Queues `event` and makes sure a drain is due (unless stopped).
  void Push(Event event) {
    events_.push_back(std::move(event));
    Arm();
  }

  // From now on Push only queues: nothing is delivered by the timer (the
  // owner takes the events with PopFront). Cancels a pending drain.
  void Stop() {
    stopped_ = true;
    StopTimer();
  }
  // Cancels a pending drain and takes every queued event (to cancel them).
  std::deque<Event> TakeAll() {
    StopTimer();
    std::deque<Event> all;
    all.swap(events_);
    return all;
  }
  // Takes the first queued event; false when there is none.
  bool PopFront(Event* event) {
    if (events_.empty()) return false;
    *event = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  bool empty() const { return events_.empty(); }

 private:
  void Arm() {
    if (timer_ != 0 || stopped_ || events_.empty()) return;
    timer_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
      timer_ = 0;
      Drain();
    });
  }
  void StopTimer() {
    if (timer_ != 0) loop_->Cancel(timer_);
    timer_ = 0;
  }
  void Drain() {
    std::weak_ptr<int> alive = life_;
    const size_t n = events_.size();
    for (size_t i = 0; i < n && !events_.empty(); ++i) {
      Event e = std::move(events_.front());
      events_.pop_front();
      deliver_(std::move(e));
      if (alive.expired()) return;  // the owner and this queue are gone
    }
    Arm();  // what the callbacks queued goes on the next turn
  }

  EventLoop* const loop_;
  absl::AnyInvocable<void(Event&&)> deliver_;
  std::deque<Event> events_;
  TimerId timer_ = 0;
  bool stopped_ = false;
  // Expires when the queue is destroyed (inside a delivered callback).
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_DEFERRED_QUEUE_H_
