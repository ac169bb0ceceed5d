#include "dlock/watchdog/renewal_schedule.h"

#include <algorithm>

namespace dlock {
namespace watchdog_internal {
namespace {

// Both queues are binary min-heaps of slot pointers ordered by
// (slot.*kTime, slot.seq); each slot keeps its index in slot.*kPos, so a
// slot is moved or removed in O(log n) without a search.
using TimeField = int64_t ScheduleSlot::*;
using PosField = uint32_t ScheduleSlot::*;

template <TimeField kTime>
bool Before(const ScheduleSlot* a, const ScheduleSlot* b) {
  if (a->*kTime != b->*kTime) return a->*kTime < b->*kTime;
  return a->seq < b->seq;
}

template <TimeField kTime, PosField kPos>
void Place(std::vector<ScheduleSlot*>& heap, size_t i, ScheduleSlot* slot) {
  heap[i] = slot;
  slot->*kPos = static_cast<uint32_t>(i);
}

template <TimeField kTime, PosField kPos>
void SiftUp(std::vector<ScheduleSlot*>& heap, size_t i) {
  ScheduleSlot* slot = heap[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before<kTime>(slot, heap[parent])) break;
    Place<kTime, kPos>(heap, i, heap[parent]);
    i = parent;
  }
  Place<kTime, kPos>(heap, i, slot);
}

template <TimeField kTime, PosField kPos>
void SiftDown(std::vector<ScheduleSlot*>& heap, size_t i) {
  ScheduleSlot* slot = heap[i];
  const size_t n = heap.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Before<kTime>(heap[child + 1], heap[child])) ++child;
    if (!Before<kTime>(heap[child], slot)) break;
    Place<kTime, kPos>(heap, i, heap[child]);
    i = child;
  }
  Place<kTime, kPos>(heap, i, slot);
}

// Queues `slot` at `t`, moves it there, or (InfiniteFuture) takes it out.
template <TimeField kTime, PosField kPos>
void Set(std::vector<ScheduleSlot*>& heap, ScheduleSlot& slot, int64_t t) {
  const uint32_t pos = slot.*kPos;
  if (t == CompactTime::kFuture) {
    slot.*kTime = t;
    if (pos == ScheduleSlot::kNotQueued) return;
    slot.*kPos = ScheduleSlot::kNotQueued;
    ScheduleSlot* last = heap.back();
    heap.pop_back();
    if (last == &slot) return;
    Place<kTime, kPos>(heap, pos, last);
    SiftDown<kTime, kPos>(heap, pos);
    SiftUp<kTime, kPos>(heap, last->*kPos);
    return;
  }
  if (pos == ScheduleSlot::kNotQueued) {
    slot.*kTime = t;
    heap.push_back(&slot);
    SiftUp<kTime, kPos>(heap, heap.size() - 1);
    return;
  }
  const bool earlier = t < slot.*kTime;
  slot.*kTime = t;
  if (earlier) {
    SiftUp<kTime, kPos>(heap, pos);
  } else {
    SiftDown<kTime, kPos>(heap, pos);
  }
}

// The slots at or before `bound`, earliest first. They form a subtree at
// the root (a heap's children are never earlier than their parent).
template <TimeField kTime>
std::vector<ScheduleSlot*> UpTo(const std::vector<ScheduleSlot*>& heap,
                                int64_t bound) {
  std::vector<ScheduleSlot*> out;
  if (heap.empty() || heap[0]->*kTime > bound) return out;
  std::vector<size_t> pending = {0};
  while (!pending.empty()) {
    const size_t i = pending.back();
    pending.pop_back();
    out.push_back(heap[i]);
    for (size_t child = 2 * i + 1; child <= 2 * i + 2 && child < heap.size();
         ++child) {
      if (heap[child]->*kTime <= bound) pending.push_back(child);
    }
  }
  std::sort(out.begin(), out.end(), Before<kTime>);
  return out;
}

}  // namespace

void RenewalSchedule::SetRenewAt(ScheduleSlot& slot, absl::Time t) {
  Set<&ScheduleSlot::renew_at, &ScheduleSlot::renew_pos>(renew_heap_, slot,
                                                         clock_.Ticks(t));
}

void RenewalSchedule::SetDeadline(ScheduleSlot& slot, absl::Time t) {
  Set<&ScheduleSlot::deadline_at, &ScheduleSlot::deadline_pos>(
      deadline_heap_, slot, clock_.Ticks(t));
}

std::vector<ScheduleSlot*> RenewalSchedule::DeadlinesPassed(absl::Time now) const {
  return UpTo<&ScheduleSlot::deadline_at>(deadline_heap_, clock_.Ticks(now));
}

std::vector<ScheduleSlot*> RenewalSchedule::RenewalsDue(absl::Time horizon) const {
  return UpTo<&ScheduleSlot::renew_at>(renew_heap_, clock_.Ticks(horizon));
}

void RenewalSchedule::Arm() {
  if (cleared_) return;
  int64_t ticks = CompactTime::kFuture;
  if (!renew_heap_.empty()) ticks = renew_heap_[0]->renew_at;
  if (!deadline_heap_.empty()) {
    ticks = std::min(ticks, deadline_heap_[0]->deadline_at);
  }
  const absl::Time next = clock_.At(ticks);
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
  for (ScheduleSlot* slot : renew_heap_) slot->renew_pos = ScheduleSlot::kNotQueued;
  for (ScheduleSlot* slot : deadline_heap_) {
    slot->deadline_pos = ScheduleSlot::kNotQueued;
  }
  std::vector<ScheduleSlot*>().swap(renew_heap_);
  std::vector<ScheduleSlot*>().swap(deadline_heap_);
}

}  // namespace watchdog_internal
}  // namespace dlock
