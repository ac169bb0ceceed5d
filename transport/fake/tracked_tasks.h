// Internal to //transport/fake:fake_transport. This header defines
// `TrackedTasks`: the loop timers one FakeTransport has set, kept so that
// Close() (or destruction) can cancel every one of them and no task runs
// after it. The command queue, the subscriptions and the facade of a
// FakeTransport share one set.
//
// Not thread-safe: call only on the thread running `loop`.
#ifndef DLOCK_TRANSPORT_FAKE_TRACKED_TASKS_H_
#define DLOCK_TRANSPORT_FAKE_TRACKED_TASKS_H_

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

class TrackedTasks {
 public:
  // `loop` must outlive the set.
  explicit TrackedTasks(EventLoop* loop) : loop_(loop) {}
  TrackedTasks(const TrackedTasks&) = delete;
  TrackedTasks& operator=(const TrackedTasks&) = delete;
  ~TrackedTasks() { CancelAll(); }

  // Runs `fn` on the loop after `delay`; returns its key (never 0). The
  // task is forgotten before `fn` runs, so `fn` may destroy the set.
  uint64_t Schedule(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
    const uint64_t key = next_key_++;
    const TimerId id = loop_->RunAfter(delay, [this, key, fn = std::move(fn)]() mutable {
      tasks_.erase(key);
      std::move(fn)();
    });
    tasks_[key] = id;
    return key;
  }

  // Cancels a task that has not run; nothing for 0 or a task that ran.
  void Cancel(uint64_t key) {
    if (key == 0) return;
    auto it = tasks_.find(key);
    if (it == tasks_.end()) return;
    const TimerId id = it->second;
    tasks_.erase(it);
    loop_->Cancel(id);
  }

  // Cancels every task that has not run.
  void CancelAll() {
    for (auto& [key, id] : tasks_) loop_->Cancel(id);
    tasks_.clear();
  }

  EventLoop* loop() const { return loop_; }

 private:
  EventLoop* const loop_;
  uint64_t next_key_ = 1;
  absl::flat_hash_map<uint64_t, TimerId> tasks_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_TRACKED_TASKS_H_
