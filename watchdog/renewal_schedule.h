// This header defines `RenewalSchedule`, the Watchdog's timetable: for every
// watched lease, when its next renewal is due and when its local deadline
// passes, kept in two ordered queues behind ONE loop timer armed at the
// earliest of them. It knows nothing about locks or replies: the Watchdog
// (watchdog.cc) decides what a due renewal or a passed deadline means.
//
// Internal to //watchdog. Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_
#define DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {
namespace watchdog_internal {

// One lease's place in the schedule, stored in the lease's own record so
// that moving it costs two set operations and no lookup.
// InfiniteFuture: not queued.
struct ScheduleSlot {
  absl::Time renew_at = absl::InfiniteFuture();
  absl::Time deadline_at = absl::InfiniteFuture();
};

class RenewalSchedule {
 public:
  // `loop` must outlive the schedule. `on_timer` runs (on the loop, never
  // inside a call of this class) when the earliest queued time has come;
  // it is expected to take what is due and call Arm() again.
  RenewalSchedule(EventLoop* loop, absl::AnyInvocable<void()> on_timer)
      : loop_(loop), on_timer_(std::move(on_timer)) {}
  RenewalSchedule(const RenewalSchedule&) = delete;
  RenewalSchedule& operator=(const RenewalSchedule&) = delete;
  ~RenewalSchedule() { Clear(); }

  // Moves lease `id` to renew at `t` (InfiniteFuture: not renewed).
  void SetRenewAt(uint64_t id, ScheduleSlot& slot, absl::Time t);
  // Moves lease `id`'s local deadline to `t` (InfiniteFuture: none).
  void SetDeadline(uint64_t id, ScheduleSlot& slot, absl::Time t);
  // Takes lease `id` out of both queues.
  void Remove(uint64_t id, ScheduleSlot& slot) {
    SetRenewAt(id, slot, absl::InfiniteFuture());
    SetDeadline(id, slot, absl::InfiniteFuture());
  }

  // The leases whose deadline is at or before `now`, earliest first.
  std::vector<uint64_t> DeadlinesPassed(absl::Time now) const;
  // The leases due to renew at or before `horizon`, earliest first.
  std::vector<uint64_t> RenewalsDue(absl::Time horizon) const;

  // Keeps the one loop timer armed at the earliest queued time, or cancels
  // it when both queues are empty (so the host loop can run dry).
  void Arm();
  // Cancels the timer and empties both queues (the slots are left as they
  // are: the caller is discarding its records). Arm() does nothing after.
  void Clear();

 private:
  using QueueKey = std::pair<absl::Time, uint64_t>;

  void OnTimer() {
    timer_ = 0;
    on_timer_();  // may destroy this schedule's owner: touch nothing after
  }

  EventLoop* const loop_;
  absl::AnyInvocable<void()> on_timer_;
  bool cleared_ = false;
  std::set<QueueKey> renew_queue_;
  std::set<QueueKey> deadline_queue_;
  TimerId timer_ = 0;
  absl::Time armed_at_ = absl::InfiniteFuture();
};

}  // namespace watchdog_internal
}  // namespace dlock

#endif  // DLOCK_WATCHDOG_RENEWAL_SCHEDULE_H_
