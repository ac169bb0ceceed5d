// This header defines `RenewalSchedule`, the Watchdog's timetable: for every
// watched lease, when its next renewal is due and when its local deadline
// passes, kept in two intrusive binary min-heaps behind ONE loop timer armed
// at the earliest of them. It knows nothing about locks or replies: the
// Watchdog (watchdog.cc) decides what a due renewal or a passed deadline
// means.
//
// Memory. A lease's times and heap positions live in its own record (a
// `ScheduleSlot` the caller embeds); each heap holds one pointer per queued
// lease. Queueing, moving or removing a lease allocates nothing (apart from
// the heaps' vectors growing to their high-water mark) and costs O(log n).
//
// Internal to //watchdog. Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_
#define DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <climits>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {
namespace watchdog_internal {

// Times and durations in 8 bytes instead of absl's 16, exactly: whole
// quarter nanoseconds (absl's own resolution) counted from an epoch (the
// schedule's creation). Exact within +-73 years of the epoch; beyond that a
// finite value saturates (stays finite). kFuture / kPast stand for
// InfiniteFuture / InfinitePast (and the infinite durations).
class CompactTime {
 public:
  static constexpr int64_t kFuture = INT64_MAX;
  static constexpr int64_t kPast = INT64_MIN;

  explicit CompactTime(absl::Time epoch) : epoch_(epoch) {}

  int64_t Ticks(absl::Time t) const {
    if (t == absl::InfiniteFuture()) return kFuture;
    if (t == absl::InfinitePast()) return kPast;
    return DurationTicks(t - epoch_);
  }
  absl::Time At(int64_t ticks) const {
    if (ticks == kFuture) return absl::InfiniteFuture();
    if (ticks == kPast) return absl::InfinitePast();
    return epoch_ + TicksDuration(ticks);
  }
  static int64_t DurationTicks(absl::Duration d) {
    if (d == absl::InfiniteDuration()) return kFuture;
    if (d == -absl::InfiniteDuration()) return kPast;
    absl::Duration rem;
    const int64_t q = absl::IDivDuration(d, Tick(), &rem);
    return q == kFuture ? kFuture - 1 : q == kPast ? kPast + 1 : q;
  }
  static absl::Duration TicksDuration(int64_t ticks) {
    if (ticks == kFuture) return absl::InfiniteDuration();
    if (ticks == kPast) return -absl::InfiniteDuration();
    return Tick() * ticks;
  }

 private:
  static absl::Duration Tick() { return absl::Nanoseconds(1) / 4; }
  absl::Time epoch_;
};

// One lease's place in the schedule, embedded in the lease's own record (the
// schedule keeps pointers to it: it must not move while queued). Times are
// CompactTime ticks of the schedule's clock(); kFuture: not queued. Leases
// due at the same time come out in the order of `seq` (the caller numbers
// them, e.g. in the order they were watched).
struct ScheduleSlot {
  static constexpr uint32_t kNotQueued = ~uint32_t{0};
  int64_t renew_at = CompactTime::kFuture;
  int64_t deadline_at = CompactTime::kFuture;
  uint64_t seq = 0;
  uint32_t renew_pos = kNotQueued;     // index in the renew heap
  uint32_t deadline_pos = kNotQueued;  // index in the deadline heap
};

class RenewalSchedule {
 public:
  // `loop` must outlive the schedule. `on_timer` runs (on the loop, never
  // inside a call of this class) when the earliest queued time has come;
  // it is expected to take what is due and call Arm() again.
  RenewalSchedule(EventLoop* loop, absl::AnyInvocable<void()> on_timer)
      : loop_(loop), clock_(loop->Now()), on_timer_(std::move(on_timer)) {}
  RenewalSchedule(const RenewalSchedule&) = delete;
  RenewalSchedule& operator=(const RenewalSchedule&) = delete;
  ~RenewalSchedule() { Clear(); }

  // Moves `slot` to renew at `t` (InfiniteFuture: not renewed).
  void SetRenewAt(ScheduleSlot& slot, absl::Time t);
  // Moves `slot`'s local deadline to `t` (InfiniteFuture: none).
  void SetDeadline(ScheduleSlot& slot, absl::Time t);
  // When `slot` renews / reaches its deadline (InfiniteFuture: not queued).
  absl::Time RenewAt(const ScheduleSlot& slot) const { return clock_.At(slot.renew_at); }
  absl::Time DeadlineAt(const ScheduleSlot& slot) const {
    return clock_.At(slot.deadline_at);
  }
  // The clock of the slots' times (the owner may keep its own times in it).
  const CompactTime& clock() const { return clock_; }

  // Takes `slot` out of both queues.
  void Remove(ScheduleSlot& slot) {
    SetRenewAt(slot, absl::InfiniteFuture());
    SetDeadline(slot, absl::InfiniteFuture());
  }

  // The slots whose deadline is at or before `now`, earliest first.
  std::vector<ScheduleSlot*> DeadlinesPassed(absl::Time now) const;
  // The slots due to renew at or before `horizon`, earliest first.
  std::vector<ScheduleSlot*> RenewalsDue(absl::Time horizon) const;

  // Number of slots with a deadline queued.
  size_t with_deadline() const { return deadline_heap_.size(); }
  // Every slot with a deadline queued, in no particular order.
  const std::vector<ScheduleSlot*>& slots_with_deadline() const {
    return deadline_heap_;
  }

  // Keeps the one loop timer armed at the earliest queued time, or cancels
  // it when both queues are empty (so the host loop can run dry).
  void Arm();
  // Cancels the timer and empties both queues (the slots are left as they
  // are: the caller is discarding its records). Arm() does nothing after.
  void Clear();

 private:
  void OnTimer() {
    timer_ = 0;
    on_timer_();  // may destroy this schedule's owner: touch nothing after
  }

  EventLoop* const loop_;
  const CompactTime clock_;
  absl::AnyInvocable<void()> on_timer_;
  bool cleared_ = false;
  std::vector<ScheduleSlot*> renew_heap_;
  std::vector<ScheduleSlot*> deadline_heap_;
  TimerId timer_ = 0;
  absl::Time armed_at_ = absl::InfiniteFuture();
};

}  // namespace watchdog_internal
}  // namespace dlock

#endif  // DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_
