#include "dlock/transport/fake/manual_event_loop.h"

#include <algorithm>
#include <utility>

namespace dlock {

ManualEventLoop::ManualEventLoop() : now_(Origin()) {}

ManualEventLoop::~ManualEventLoop() {
  // A callback's destructor may call back into the loop (e.g. Cancel); move
  // the timers out first so no iterator is live while they are destroyed.
  while (!timers_.empty()) {
    auto pending = std::move(timers_);
    timers_.clear();
    deadlines_.clear();
    pending.clear();
  }
}

TimerId ManualEventLoop::RunAfter(absl::Duration delay,
                                  absl::AnyInvocable<void() &&> callback) {
  const TimerId id = next_id_++;
  const absl::Time deadline = now_ + std::max(delay, absl::ZeroDuration());
  timers_.emplace(Key(deadline, id), std::move(callback));
  deadlines_.emplace(id, deadline);
  return id;
}

bool ManualEventLoop::Cancel(TimerId id) {
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return false;
  auto node = timers_.extract(Key(it->second, id));
  deadlines_.erase(it);
  // `node` (and the callback in it) is destroyed here, before returning.
  return true;
}

bool ManualEventLoop::RunOneDue(absl::Time limit) {
  if (timers_.empty()) return false;
  auto it = timers_.begin();
  if (it->first.first > limit) return false;
  const Key key = it->first;
  absl::AnyInvocable<void() &&> callback = std::move(it->second);
  timers_.erase(it);
  deadlines_.erase(key.second);
  if (key.first > now_) now_ = key.first;
  std::move(callback)();
  return true;
}

size_t ManualEventLoop::AdvanceTime(absl::Duration d) {
  return AdvanceTo(now_ + std::max(d, absl::ZeroDuration()));
}

size_t ManualEventLoop::AdvanceTo(absl::Time target) {
  target = std::max(target, now_);
  size_t ran = 0;
  while (RunOneDue(target)) ++ran;
  // A nested AdvanceTime inside a callback may have moved past `target`.
  if (target > now_) now_ = target;
  return ran;
}

size_t ManualEventLoop::RunUntilIdle() {
  size_t ran = 0;
  while (RunOneDue(now_)) ++ran;
  return ran;
}

bool ManualEventLoop::RunNext() {
  if (timers_.empty()) return false;
  AdvanceTo(timers_.begin()->first.first);
  return true;
}

absl::Time ManualEventLoop::NextDeadline() const {
  if (timers_.empty()) return absl::InfiniteFuture();
  return timers_.begin()->first.first;
}

}  // namespace dlock
