#include "dlock/watchdog/renewal_schedule.h"

#include <algorithm>

namespace dlock {
namespace watchdog_internal {

void RenewalSchedule::SetRenewAt(uint64_t id, ScheduleSlot& slot, absl::Time t) {
  if (slot.renew_at != absl::InfiniteFuture()) {
    renew_queue_.erase(QueueKey(slot.renew_at, id));
  }
  slot.renew_at = t;
  if (t != absl::InfiniteFuture()) renew_queue_.emplace(t, id);
}

void RenewalSchedule::SetDeadline(uint64_t id, ScheduleSlot& slot, absl::Time t) {
  if (slot.deadline_at != absl::InfiniteFuture()) {
    deadline_queue_.erase(QueueKey(slot.deadline_at, id));
  }
  slot.deadline_at = t;
  if (t != absl::InfiniteFuture()) deadline_queue_.emplace(t, id);
}

std::vector<uint64_t> RenewalSchedule::DeadlinesPassed(absl::Time now) const {
  std::vector<uint64_t> ids;
  for (auto it = deadline_queue_.begin();
       it != deadline_queue_.end() && it->first <= now; ++it) {
    ids.push_back(it->second);
  }
  return ids;
}

std::vector<uint64_t> RenewalSchedule::RenewalsDue(absl::Time horizon) const {
  std::vector<uint64_t> ids;
  for (auto it = renew_queue_.begin();
       it != renew_queue_.end() && it->first <= horizon; ++it) {
    ids.push_back(it->second);
  }
  return ids;
}

void RenewalSchedule::Arm() {
  if (cleared_) return;
  absl::Time next = absl::InfiniteFuture();
  if (!renew_queue_.empty()) next = renew_queue_.begin()->first;
  if (!deadline_queue_.empty()) {
    next = std::min(next, deadline_queue_.begin()->first);
  }
  if (next == absl::InfiniteFuture()) {
    if (timer_ != 0) loop_->Cancel(timer_);
    timer_ = 0;
    return;
  }
  // An earlier timer is fine: it re-arms when it finds nothing due.
  if (timer_ != 0 && armed_at_ <= next) return;
  if (timer_ != 0) loop_->Cancel(timer_);
  armed_at_ = next;
  // The owner keeps this schedule alive until Clear(), which cancels the
  // timer, so `this` is valid whenever the timer fires.
  timer_ = loop_->RunAfter(next - loop_->Now(), [this]() { OnTimer(); });
}

void RenewalSchedule::Clear() {
  cleared_ = true;
  if (timer_ != 0) loop_->Cancel(timer_);
  timer_ = 0;
  renew_queue_.clear();
  deadline_queue_.clear();
}

}  // namespace watchdog_internal
}  // namespace dlock
