#include "dlock/watchdog/watchdog.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/watchdog/renewal_schedule.h"

namespace dlock {
namespace watchdog_internal {

enum class State : uint8_t {
  kWatching,  // renewing
  kLost,      // on_lost ran (or would have)
  kStopped,   // the holder stopped renewal
  kReleased,  // the holder released through the handle
  kOrphaned,  // the Watchdog was destroyed
};

// One watched lease: one allocation (no control block, no map node, no
// queue nodes). Its ScheduleSlot base is its place in Core::schedule_.
// Referenced (EntryRef) by the Core while watching, by the handle, and by
// extend callbacks in flight (so a late reply always finds it).
// (on_lost first: its storage is 16-byte aligned, Lease's size is not a
// multiple of 16.)
struct Entry : ScheduleSlot {
  absl::AnyInvocable<void(absl::Status) &&> on_lost;
  Lease lease;
  // Durations and times as CompactTime ticks (8 bytes each, exact).
  int64_t renew_interval = 0;
  int64_t retry_interval = 0;
  int64_t last_send = CompactTime::kPast;
  absl::Status last_error;
  // For the observer.
  int64_t watched_since = 0;
  uint32_t renewals = 0;
  uint32_t refs = 0;
  int32_t inflight = 0;
  State state = State::kWatching;
  bool release_late_renewal = true;
};

EntryRef::EntryRef(Entry* entry) : entry_(entry) {
  if (entry_) ++entry_->refs;
}

EntryRef::~EntryRef() {
  if (entry_ && --entry_->refs == 0) delete entry_;
}

// A renewal failure worth retrying (the extend may not have run).
static bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

// The per-lease renewal state machine: sends extends when the schedule says
// a renewal is due, reads their replies, declares a lease lost (and reports
// to the observer). When things happen is RenewalSchedule's job.
class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(EventLoop* loop, Lock* lock, WatchdogOptions options)
      : loop_(loop),
        lock_(lock),
        options_(options),
        observer_(ObserverOrNoop(options.observer)),
        schedule_(loop, [this]() { OnTimer(); }) {}

  EventLoop* loop() const { return loop_; }
  Lock* lock() const { return lock_; }
  bool shut_down() const { return shut_down_; }
  // Every watching lease has its deadline queued (and only those).
  size_t watched() const { return schedule_.with_deadline(); }

  EntryRef Add(const Lease& lease, WatchOptions options,
               absl::Duration interval, absl::Duration retry) {
    EntryRef entry(new Entry());
    entry->seq = next_seq_++;
    entry->lease = lease;
    entry->renew_interval = CompactTime::DurationTicks(interval);
    entry->retry_interval = CompactTime::DurationTicks(retry);
    entry->release_late_renewal = options.release_late_renewal;
    entry->on_lost = std::move(options.on_lost);
    entry->watched_since = schedule_.clock().Ticks(loop_->Now());
    ++entry->refs;  // the schedule's reference, dropped by Remove()
    schedule_.SetDeadline(*entry, lease.deadline);
    schedule_.SetRenewAt(*entry, std::max(loop_->Now(),
                                          lease.deadline - lease.ttl + interval));
    schedule_.Arm();
    return entry;
  }

  // Takes `entry` out of the schedule (it is no longer renewed). `entry`
  // must be watching and referenced by the caller too.
  void Remove(Entry& entry) {
    schedule_.Remove(entry);
    --entry.refs;  // the schedule's reference; the caller holds another
    schedule_.Arm();
  }

  void Shutdown() {
    shut_down_ = true;
    // Take the schedule's references first: destroying on_lost callbacks
    // runs user destructors.
    std::vector<EntryRef> entries;
    entries.reserve(schedule_.with_deadline());
    for (ScheduleSlot* slot : schedule_.slots_with_deadline()) {
      Entry* entry = static_cast<Entry*>(slot);
      entries.emplace_back(entry);
      --entry->refs;  // hand the schedule's reference to `entries`
    }
    schedule_.Clear();
    // Every state first: a destructor run below may stop or release another
    // handle, which must then find its watch already over.
    for (EntryRef& entry : entries) entry->state = State::kOrphaned;
    for (EntryRef& entry : entries) auto on_lost = std::move(entry->on_lost);
  }

 private:
  void SetRenewAt(Entry& entry, absl::Time t) { schedule_.SetRenewAt(entry, t); }

  static absl::Duration RenewInterval(const Entry& entry) {
    return CompactTime::TicksDuration(entry.renew_interval);
  }
  static absl::Duration RetryInterval(const Entry& entry) {
    return CompactTime::TicksDuration(entry.retry_interval);
  }
  absl::Time LastSend(const Entry& entry) const {
    return schedule_.clock().At(entry.last_send);
  }

  // References to the queued leases in `slots` (kept alive while user
  // callbacks run).
  static std::vector<EntryRef> Refs(const std::vector<ScheduleSlot*>& slots) {
    std::vector<EntryRef> refs;
    refs.reserve(slots.size());
    for (ScheduleSlot* slot : slots) refs.emplace_back(static_cast<Entry*>(slot));
    return refs;
  }

  // Schedules a retry `retry_interval` from now, if that is still before the
  // local deadline (otherwise the deadline timer will declare it lost).
  void ScheduleRetry(Entry& entry, absl::Time now) {
    const absl::Time at = now + RetryInterval(entry);
    SetRenewAt(entry, at < entry.lease.deadline ? at : absl::InfiniteFuture());
  }

  void OnTimer() {
    // Keeps this Core alive while user callbacks run (one may destroy the
    // Watchdog; shut_down_ tells us to stop then).
    std::shared_ptr<Core> self = shared_from_this();
    const absl::Time now = loop_->Now();

    std::vector<EntryRef> expired = Refs(schedule_.DeadlinesPassed(now));
    std::vector<EntryRef> due =
        Refs(schedule_.RenewalsDue(now + options_.batch_window));

    for (const EntryRef& entry : expired) {
      if (shut_down_) return;
      if (entry->state != State::kWatching) continue;
      absl::Status why = absl::DeadlineExceededError(absl::StrCat(
          "lease on '", entry->lease.resource,
          "' reached its local deadline before a renewal succeeded",
          entry->last_error.ok() ? "" : "; last renewal error: ",
          entry->last_error.ok() ? "" : entry->last_error.ToString()));
      DeclareLost(*entry, std::move(why));
    }
    for (const EntryRef& entry : due) {
      if (shut_down_) return;
      if (entry->state != State::kWatching) continue;
      // A lease with a short interval is never renewed more than a quarter
      // of its interval early (it stays queued for its own time).
      if (schedule_.RenewAt(*entry) > now + RenewInterval(*entry) / 4) continue;
      if (now >= entry->lease.deadline) {
        // The timer fired past the deadline: the loop stalled. Renewing now
        // would paper over a window in which the lock was not held.
        DeclareLost(*entry,
                    absl::DeadlineExceededError(absl::StrCat(
                        "loop stalled: renewal of '", entry->lease.resource,
                        "' ran ", absl::FormatDuration(now - entry->lease.deadline),
                        " past the lease's local deadline")));
        continue;
      }
      if (entry->inflight > 0 &&
          now < LastSend(*entry) + RetryInterval(*entry)) {
        // An extend is in flight and young: wait for it a little longer.
        SetRenewAt(*entry, LastSend(*entry) + RetryInterval(*entry));
        continue;
      }
      SendExtend(entry, now);
    }
    schedule_.Arm();
  }

  void SendExtend(const EntryRef& entry, absl::Time now) {
    entry->inflight++;
    entry->last_send = schedule_.clock().Ticks(now);
    // Until an answer comes, look again after retry_interval (a reply may be
    // lost); success reschedules at the normal interval.
    ScheduleRetry(*entry, now);
    std::weak_ptr<Core> weak = weak_from_this();
    const absl::Duration margin = entry->lease.deadline - now;
    absl::Status sent = lock_->Extend(
        entry->lease, entry->lease.ttl,
        [weak, entry, now, margin](absl::StatusOr<Lease> result) {
          entry->inflight--;
          std::shared_ptr<Core> core = weak.lock();
          if (core == nullptr) return;
          core->OnReply(*entry, now, margin, std::move(result));
        });
    if (!sent.ok()) {
      entry->inflight--;
      ReportRenewal(*entry, sent, absl::ZeroDuration(), margin);
      if (Transient(sent)) {
        entry->last_error = sent;
      } else {
        DeclareLost(*entry, std::move(sent));
      }
    }
  }

  void ReportRenewal(Entry& entry, const absl::Status& status,
                     absl::Duration latency, absl::Duration margin) {
    RenewalEvent event;
    event.resource = entry.lease.resource;
    event.status = status;
    event.latency = latency;
    event.margin = margin;
    event.renewal = ++entry.renewals;
    observer_->OnRenewal(event);
  }

  void OnReply(Entry& entry, absl::Time sent_at, absl::Duration margin,
               absl::StatusOr<Lease> result) {
    if (shut_down_) return;
    if (entry.state == State::kLost && result.ok() && entry.release_late_renewal) {
      // The lease was declared lost, yet this late extend renewed the key:
      // nobody holds it now, so give it back instead of blocking others.
      ReleaseInBackground(*result);
      return;
    }
    // Stopped or released: the reply changes nothing.
    if (entry.state != State::kWatching) return;
    std::shared_ptr<Core> self = shared_from_this();
    const absl::Time now = loop_->Now();
    ReportRenewal(entry, result.status(), now - sent_at, margin);
    if (result.ok()) {
      if (now >= entry.lease.deadline) {
        Lease renewed = *std::move(result);
        DeclareLost(entry, absl::DeadlineExceededError(absl::StrCat(
                               "renewal of '", entry.lease.resource,
                               "' answered ", absl::FormatDuration(now - entry.lease.deadline),
                               " after the lease's local deadline")));
        if (!shut_down_ && entry.release_late_renewal) ReleaseInBackground(renewed);
        return;
      }
      if (result->deadline > entry.lease.deadline) {
        entry.lease = *std::move(result);
        entry.last_error = absl::OkStatus();
        schedule_.SetDeadline(entry, entry.lease.deadline);
        SetRenewAt(entry, std::max(now, entry.lease.deadline - entry.lease.ttl +
                                            RenewInterval(entry)));
        schedule_.Arm();
      }
      return;
    }
    absl::Status status = std::move(result).status();
    if (!Transient(status)) {
      DeclareLost(entry, std::move(status));
      return;
    }
    entry.last_error = status;
    if (entry.renew_at == CompactTime::kFuture && entry.inflight == 0) {
      ScheduleRetry(entry, now);
      schedule_.Arm();
    }
  }

  void ReleaseInBackground(const Lease& lease) {
    // Best effort; the outcome does not matter (kFailedPrecondition means
    // the key is already gone).
    lock_->Release(lease, [](absl::Status) {}).IgnoreError();
  }

  // Ends the watch and tells the holder. The caller must hold a reference
  // to this Core (the holder may destroy the Watchdog).
  void DeclareLost(Entry& entry, absl::Status status) {
    Remove(entry);
    entry.state = State::kLost;
    auto on_lost = std::move(entry.on_lost);
    entry.on_lost = nullptr;
    LeaseLostEvent event;
    event.resource = entry.lease.resource;
    event.status = status;
    event.held_for = loop_->Now() - schedule_.clock().At(entry.watched_since);
    observer_->OnLeaseLost(event);
    if (on_lost) std::move(on_lost)(std::move(status));
  }

  EventLoop* const loop_;
  Lock* const lock_;
  const WatchdogOptions options_;
  LockObserver* const observer_;
  bool shut_down_ = false;
  uint64_t next_seq_ = 1;
  RenewalSchedule schedule_;
};

}  // namespace watchdog_internal

using watchdog_internal::Core;
using watchdog_internal::Entry;
using watchdog_internal::EntryRef;
using watchdog_internal::State;

// --- WatchHandle ---

WatchHandle::WatchHandle(EntryRef entry, std::weak_ptr<Core> core)
    : entry_(std::move(entry)), core_(std::move(core)) {}

WatchHandle::~WatchHandle() { Stop(); }

WatchHandle& WatchHandle::operator=(WatchHandle&& other) noexcept {
  if (this != &other) {
    Stop();
    entry_ = std::move(other.entry_);
    core_ = std::move(other.core_);
  }
  return *this;
}

bool WatchHandle::active() const {
  return entry_ && entry_->state == State::kWatching;
}

bool WatchHandle::lost() const {
  return entry_ && entry_->state == State::kLost;
}

bool WatchHandle::IsValid() const {
  if (!entry_) return false;
  if (entry_->state != State::kWatching && entry_->state != State::kStopped) {
    return false;
  }
  std::shared_ptr<Core> core = core_.lock();
  if (core == nullptr || core->shut_down()) return false;
  return core->loop()->Now() < entry_->lease.deadline;
}

const Lease& WatchHandle::lease() const { return entry_->lease; }

void WatchHandle::Stop() {
  if (!entry_ || entry_->state != State::kWatching) return;
  entry_->state = State::kStopped;
  auto on_lost = std::move(entry_->on_lost);
  entry_->on_lost = nullptr;
  if (std::shared_ptr<Core> core = core_.lock()) core->Remove(*entry_);
}

absl::Status WatchHandle::Release(StatusCallback callback) {
  if (!entry_) {
    return absl::FailedPreconditionError("empty WatchHandle");
  }
  if (entry_->state == State::kReleased) {
    return absl::FailedPreconditionError("lease already released");
  }
  std::shared_ptr<Core> core = core_.lock();
  if (core == nullptr || core->shut_down()) {
    return absl::CancelledError("the Watchdog was destroyed");
  }
  // Renewal ends before the release is sent: nothing renews after it.
  if (entry_->state == State::kWatching) core->Remove(*entry_);
  const State before =
      entry_->state == State::kLost ? State::kLost : State::kStopped;
  entry_->state = State::kReleased;
  entry_->on_lost = nullptr;
  absl::Status status = core->lock()->Release(entry_->lease, std::move(callback));
  if (!status.ok()) entry_->state = before;
  return status;
}

// --- Watchdog ---

Watchdog::Watchdog(EventLoop* loop, Lock* lock, WatchdogOptions options)
    : loop_(loop),
      lock_(lock),
      core_(std::make_shared<Core>(loop, lock, options)) {}

Watchdog::~Watchdog() { core_->Shutdown(); }

size_t Watchdog::watched() const { return core_->watched(); }

absl::StatusOr<WatchHandle> Watchdog::Watch(const Lease& lease,
                                            WatchOptions options) {
  if (lease.resource.empty()) {
    return absl::InvalidArgumentError("Watch: lease has an empty resource");
  }
  if (lease.token.empty()) {
    return absl::InvalidArgumentError("Watch: lease has an empty token");
  }
  if (lease.ttl <= absl::ZeroDuration() || lease.ttl == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("Watch: lease ttl must be positive and finite");
  }
  if (options.renew_interval < absl::ZeroDuration() ||
      options.retry_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("Watch: negative renew/retry interval");
  }
  const absl::Duration interval = options.renew_interval == absl::ZeroDuration()
                                      ? lease.ttl / 3
                                      : options.renew_interval;
  if (interval >= lease.ttl || interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Watch: renew_interval ", absl::FormatDuration(interval),
                     " must be below the ttl ", absl::FormatDuration(lease.ttl)));
  }
  absl::Duration retry = options.retry_interval;
  if (retry == absl::ZeroDuration()) {
    retry = std::max(absl::Milliseconds(1),
                     std::min(lease.ttl / 10, absl::Seconds(1)));
  }
  if (loop_->Now() >= lease.deadline) {
    return absl::DeadlineExceededError(
        "Watch: the lease's local deadline has already passed");
  }
  EntryRef entry = core_->Add(lease, std::move(options), interval, retry);
  return WatchHandle(std::move(entry), core_);
}

}  // namespace dlock
