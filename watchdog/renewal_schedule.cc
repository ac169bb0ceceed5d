#include "dlock/watchdog/renewal_schedule.h"

#include <algorithm>

namespace dlock {
namespace watchdog_internal {
namespace {

// Both queues are binary min-heaps of slot pointers ordered by
// (slot.*time, slot.seq); each slot keeps its index in slot.*pos, so a
// slot is moved or removed in O(log n) without a search. Which fields a
// heap uses is data (Fields), so the heap code is compiled once for both.
struct Fields {
  int64_t ScheduleSlot::*time;
  uint32_t ScheduleSlot::*pos;
};
constexpr Fields kRenew{&ScheduleSlot::renew_at, &ScheduleSlot::renew_pos};
constexpr Fields kDeadline{&ScheduleSlot::deadline_at, &ScheduleSlot::deadline_pos};

bool Before(const Fields& f, const ScheduleSlot* a, const ScheduleSlot* b) {
  if (a->*f.time != b->*f.time) return a->*f.time < b->*f.time;
  return a->seq < b->seq;
}

void Place(const Fields& f, std::vector<ScheduleSlot*>& heap, size_t i, ScheduleSlot* slot) {
  heap[i] = slot;
  slot->*f.pos = static_cast<uint32_t>(i);
}

void SiftUp(const Fields& f, std::vector<ScheduleSlot*>& heap, size_t i) {
  ScheduleSlot* slot = heap[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before(f, slot, heap[parent])) break;
    Place(f, heap, i, heap[parent]);
    i = parent;
  }
  Place(f, heap, i, slot);
}

void SiftDown(const Fields& f, std::vector<ScheduleSlot*>& heap, size_t i) {
  ScheduleSlot* slot = heap[i];
  const size_t n = heap.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(f, heap[child + 1], heap[child])) ++child;
    if (!Before(f, heap[child], slot)) break;
    Place(f, heap, i, heap[child]);
    i = child;
  }
  Place(f, heap, i, slot);
}

// Queues `slot` at `t`, moves it there, or (InfiniteFuture) takes it out.
void Set(const Fields& f, std::vector<ScheduleSlot*>& heap, ScheduleSlot& slot, int64_t t) {
  const uint32_t pos = slot.*f.pos;
  if (t == CompactTime::kFuture) {
    slot.*f.time = t;
    if (pos == ScheduleSlot::kNotQueued) return;
    slot.*f.pos = ScheduleSlot::kNotQueued;
    ScheduleSlot* last = heap.back();
    heap.pop_back();
    if (last == &slot) return;
    Place(f, heap, pos, last);
    SiftDown(f, heap, pos);
    SiftUp(f, heap, last->*f.pos);
    return;
  }
  if (pos == ScheduleSlot::kNotQueued) {
    slot.*f.time = t;
    heap.push_back(&slot);
    SiftUp(f, heap, heap.size() - 1);
    return;
  }
  const bool earlier = t < slot.*f.time;
  slot.*f.time = t;
  if (earlier) {
    SiftUp(f, heap, pos);
  } else {
    SiftDown(f, heap, pos);
  }
}

// The slots at or before `bound`, earliest first. They form a subtree at
// the root (a heap's children are never earlier than their parent).
std::vector<ScheduleSlot*> UpTo(const Fields& f, const std::vector<ScheduleSlot*>& heap,
                                int64_t bound) {
  std::vector<ScheduleSlot*> out;
  if (heap.empty() || heap[0]->*f.time > bound) return out;
  std::vector<size_t> pending = {0};
  while (!pending.empty()) {
    const size_t i = pending.back();
    pending.pop_back();
    out.push_back(heap[i]);
    for (size_t child = 2 * i + 1; child <= 2 * i + 2 && child < heap.size();
         ++child) {
      if (heap[child]->*f.time <= bound) pending.push_back(child);
    }
  }
  std::sort(out.begin(), out.end(),
            [&f](const ScheduleSlot* a, const ScheduleSlot* b) { return Before(f, a, b); });
  return out;
}

}  // namespace

void RenewalSchedule::SetRenewAt(ScheduleSlot& slot, absl::Time t) {
  Set(kRenew, renew_heap_, slot, clock_.Ticks(t));
}

void RenewalSchedule::SetDeadline(ScheduleSlot& slot, absl::Time t) {
  Set(kDeadline, deadline_heap_, slot, clock_.Ticks(t));
}

std::vector<ScheduleSlot*> RenewalSchedule::DeadlinesPassed(absl::Time now) const {
  return UpTo(kDeadline, deadline_heap_, clock_.Ticks(now));
}

std::vector<ScheduleSlot*> RenewalSchedule::RenewalsDue(absl::Time horizon) const {
  return UpTo(kRenew, renew_heap_, clock_.Ticks(horizon));
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
