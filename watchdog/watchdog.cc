#include "dlock/watchdog/watchdog.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "dlock/lock/error_text.h"
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

// One watched lease: ONE allocation (no control block, no map node, no
// queue nodes, no string blocks). Its ScheduleSlot base is its place in
// Core::schedule_; the lease's resource and token are packed right after
// the struct in the same block (a 32-character lower-case hex token, what
// every policy makes, as its 16 bytes). Referenced (EntryRef) by the Core
// while watching, by the handle, and by extend callbacks in flight (so a
// late reply always finds it); it holds a reference to its Core in turn.
// (on_lost first: its storage is 16-byte aligned.)
struct Entry : ScheduleSlot {
  absl::AnyInvocable<void(absl::Status) &&> on_lost;
  Core* core = nullptr;  // a counted reference (CoreAddRef / CoreUnref)
  // The lease's fields as CompactTime ticks (8 bytes each, exact).
  int64_t deadline = 0;
  int64_t ttl = 0;
  int64_t fence = 0;
  int64_t renew_interval = 0;
  int64_t retry_interval = 0;
  int64_t last_send = CompactTime::kPast;
  // For the observer.
  int64_t watched_since = 0;
  absl::Status last_error;
  uint32_t renewals = 0;
  // Atomic (same 4 bytes): a stopped handle may be destroyed on another
  // thread (blocking/held_leases.h frees guard states anywhere).
  std::atomic<uint32_t> refs{0};
  int32_t inflight = 0;
  uint32_t resource_size = 0;
  uint32_t token_size = 0;  // bytes stored (16 when packed)
  State state = State::kWatching;
  bool release_late_renewal = true;
  bool token_packed = false;  // the token is 32 hex digits stored as bytes

  // A new record holding `lease`'s resource and token (refs == 0), with a
  // reference to `core`.
  static Entry* Make(Core* core, const Lease& lease);
  // Ends `entry`'s life (its last reference went).
  static void Destroy(Entry* entry);

  char* text() { return reinterpret_cast<char*>(this + 1); }
  const char* text() const { return reinterpret_cast<const char*>(this + 1); }
  absl::string_view resource() const { return {text(), resource_size}; }
  std::string token() const;
  // The lease as Lock::Extend / Release and WatchHandle::lease() take it.
  Lease MakeLease(const CompactTime& clock) const;
};

// The record's fixed part (bench/RESULTS.md counts on it), and an alignment
// that plain ::operator new gives.
static_assert(sizeof(Entry) <= 160, "a watched lease's record grew");
static_assert(alignof(Entry) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
              "Entry::Make allocates with plain ::operator new");

static void CoreAddRef(Core* core);
static void CoreUnref(Core* core);

namespace {
constexpr char kHex[] = "0123456789abcdef";
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case too: it would not come back the same
}
bool PackableToken(absl::string_view token) {
  if (token.size() != 32) return false;
  for (char c : token) {
    if (HexValue(c) < 0) return false;
  }
  return true;
}
}  // namespace

Entry* Entry::Make(Core* core, const Lease& lease) {
  const bool packed = PackableToken(lease.token);
  const size_t token_bytes = packed ? lease.token.size() / 2 : lease.token.size();
  void* block = ::operator new(sizeof(Entry) + lease.resource.size() + token_bytes);
  Entry* entry = new (block) Entry();
  entry->core = core;
  CoreAddRef(core);
  entry->fence = lease.fence;
  entry->token_packed = packed;
  entry->resource_size = static_cast<uint32_t>(lease.resource.size());
  entry->token_size = static_cast<uint32_t>(token_bytes);
  char* out = entry->text();
  std::memcpy(out, lease.resource.data(), lease.resource.size());
  out += lease.resource.size();
  if (packed) {
    for (size_t i = 0; i < token_bytes; ++i) {
      out[i] = static_cast<char>(HexValue(lease.token[2 * i]) << 4 |
                                 HexValue(lease.token[2 * i + 1]));
    }
  } else {
    std::memcpy(out, lease.token.data(), token_bytes);
  }
  return entry;
}

void Entry::Destroy(Entry* entry) {
  Core* core = entry->core;
  entry->~Entry();
  ::operator delete(entry);
  CoreUnref(core);
}

std::string Entry::token() const {
  const char* stored = text() + resource_size;
  if (!token_packed) return std::string(stored, token_size);
  std::string token(2 * token_size, '\0');
  for (size_t i = 0; i < token_size; ++i) {
    const auto byte = static_cast<unsigned char>(stored[i]);
    token[2 * i] = kHex[byte >> 4];
    token[2 * i + 1] = kHex[byte & 0xf];
  }
  return token;
}

Lease Entry::MakeLease(const CompactTime& clock) const {
  Lease lease;
  lease.resource = std::string(resource());
  lease.token = token();
  lease.fence = fence;
  lease.ttl = CompactTime::TicksDuration(ttl);
  lease.deadline = clock.At(deadline);
  return lease;
}

EntryRef::EntryRef(Entry* entry) : entry_(entry) {
  if (entry_) ++entry_->refs;
}

EntryRef::~EntryRef() {
  if (entry_ && --entry_->refs == 0) Entry::Destroy(entry_);
}

// A renewal failure worth retrying (the extend may not have run).
static bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

// Why a watch ended, as the holder's on_lost and the observer read it (kept
// out of line: error text is cold code).
static absl::Status DeadlinePassedError(absl::string_view resource,
                                        const absl::Status& last_error) {
  return ErrorStatus(absl::StatusCode::kDeadlineExceeded,
                     "lease on '%' reached its local deadline before a renewal succeeded%%",
                     {resource, last_error.ok() ? "" : "; last renewal error: ",
                      last_error.ok() ? std::string() : last_error.ToString()});
}

static absl::Status LoopStalledError(absl::string_view resource, absl::Duration over) {
  return ErrorStatus(absl::StatusCode::kDeadlineExceeded,
                     "loop stalled: renewal of '%' ran % past the lease's local deadline",
                     {resource, over});
}

static absl::Status LateRenewalError(absl::string_view resource, absl::Duration over) {
  return ErrorStatus(absl::StatusCode::kDeadlineExceeded,
                     "renewal of '%' answered % after the lease's local deadline",
                     {resource, over});
}

// References to the queued leases in `slots` (kept alive while user
// callbacks run).
static std::vector<EntryRef> Refs(const std::vector<ScheduleSlot*>& slots) {
  std::vector<EntryRef> refs;
  refs.reserve(slots.size());
  for (ScheduleSlot* slot : slots) refs.emplace_back(static_cast<Entry*>(slot));
  return refs;
}

// The per-lease renewal state machine: sends extends when the schedule says
// a renewal is due, reads their replies, declares a lease lost (and reports
// to the observer). When things happen is RenewalSchedule's job.
//
// Counted intrusively (no control block): the Watchdog holds a reference,
// every Entry holds one, and OnTimer holds one while user callbacks run.
// Once the Watchdog is destroyed, shut_down() is true and the Core touches
// neither the loop nor the lock again.
class Core {
 public:
  Core(EventLoop* loop, Lock* lock, WatchdogOptions options)
      : loop_(loop),
        lock_(lock),
        options_(options),
        observer_(ObserverOrNoop(options.observer)),
        schedule_(loop, [this]() {
          AddRef();
          OnTimerHeld();
          Unref();
        }) {}

  void AddRef() { ++refs_; }
  void Unref() {
    if (--refs_ == 0) delete this;
  }

  EventLoop* loop() const { return loop_; }
  Lock* lock() const { return lock_; }
  bool shut_down() const { return shut_down_; }
  const CompactTime& clock() const { return schedule_.clock(); }
  // Every watching lease has its deadline queued (and only those).
  size_t watched() const { return schedule_.with_deadline(); }

  EntryRef Add(const Lease& lease, WatchOptions options,
               absl::Duration interval, absl::Duration retry) {
    EntryRef entry(Entry::Make(this, lease));
    entry->seq = next_seq_++;
    entry->deadline = clock().Ticks(lease.deadline);
    entry->ttl = CompactTime::DurationTicks(lease.ttl);
    entry->renew_interval = CompactTime::DurationTicks(interval);
    entry->retry_interval = CompactTime::DurationTicks(retry);
    entry->release_late_renewal = options.release_late_renewal;
    entry->on_lost = std::move(options.on_lost);
    entry->watched_since = clock().Ticks(loop_->Now());
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

  // The reply to an extend sent at `sent_at` (ticks) with `margin` (ticks)
  // left before the deadline. `entry` holds a reference to this Core.
  void OnReply(Entry& entry, int64_t sent_at, int64_t margin,
               absl::StatusOr<Lease> result);

 private:
  void SetRenewAt(Entry& entry, absl::Time t) { schedule_.SetRenewAt(entry, t); }

  static absl::Duration RenewInterval(const Entry& entry) {
    return CompactTime::TicksDuration(entry.renew_interval);
  }
  static absl::Duration RetryInterval(const Entry& entry) {
    return CompactTime::TicksDuration(entry.retry_interval);
  }
  absl::Time LastSend(const Entry& entry) const { return clock().At(entry.last_send); }
  absl::Time Deadline(const Entry& entry) const { return clock().At(entry.deadline); }

  // Schedules a retry `retry_interval` from now, if that is still before the
  // local deadline (otherwise the deadline timer will declare it lost).
  void ScheduleRetry(Entry& entry, absl::Time now) {
    const absl::Time at = now + RetryInterval(entry);
    SetRenewAt(entry, at < Deadline(entry) ? at : absl::InfiniteFuture());
  }

  // Run by the schedule's timer, inside an AddRef()/Unref() pair: user
  // callbacks may destroy the Watchdog (shut_down_ tells us to stop then).
  void OnTimerHeld() {
    const absl::Time now = loop_->Now();
    std::vector<EntryRef> expired = Refs(schedule_.DeadlinesPassed(now));
    std::vector<EntryRef> due =
        Refs(schedule_.RenewalsDue(now + options_.batch_window));

    for (const EntryRef& entry : expired) {
      if (shut_down_) return;
      if (entry->state != State::kWatching) continue;
      DeclareLost(*entry, DeadlinePassedError(entry->resource(), entry->last_error));
    }
    for (const EntryRef& entry : due) {
      if (shut_down_) return;
      if (entry->state != State::kWatching) continue;
      // A lease with a short interval is never renewed more than a quarter
      // of its interval early (it stays queued for its own time).
      if (schedule_.RenewAt(*entry) > now + RenewInterval(*entry) / 4) continue;
      if (now >= Deadline(*entry)) {
        // The timer fired past the deadline: the loop stalled. Renewing now
        // would paper over a window in which the lock was not held.
        DeclareLost(*entry, LoopStalledError(entry->resource(), now - Deadline(*entry)));
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
    entry->last_send = clock().Ticks(now);
    // Until an answer comes, look again after retry_interval (a reply may be
    // lost); success reschedules at the normal interval.
    ScheduleRetry(*entry, now);
    const int64_t sent_at = entry->last_send;
    const int64_t margin = entry->deadline - sent_at;
    // The callback holds the record (and through it this Core): a reply
    // after the Watchdog is gone finds shut_down() and does nothing.
    absl::Status sent = lock_->Extend(
        entry->MakeLease(clock()), CompactTime::TicksDuration(entry->ttl),
        [entry, sent_at, margin](absl::StatusOr<Lease> result) {
          entry->inflight--;
          Core* core = entry->core;
          if (core->shut_down()) return;
          core->OnReply(*entry, sent_at, margin, std::move(result));
        });
    if (!sent.ok()) {
      entry->inflight--;
      ReportRenewal(*entry, sent, absl::ZeroDuration(), Deadline(*entry) - now);
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
    event.resource = entry.resource();
    event.status = status;
    event.latency = latency;
    event.margin = margin;
    event.renewal = ++entry.renewals;
    observer_->OnRenewal(event);
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
    event.resource = entry.resource();
    event.status = status;
    event.held_for = loop_->Now() - clock().At(entry.watched_since);
    observer_->OnLeaseLost(event);
    if (on_lost) std::move(on_lost)(std::move(status));
  }

  EventLoop* const loop_;
  Lock* const lock_;
  const WatchdogOptions options_;
  LockObserver* const observer_;
  // Atomic: the last reference may go with a record freed on another thread.
  std::atomic<uint32_t> refs_{0};
  bool shut_down_ = false;
  uint64_t next_seq_ = 1;
  RenewalSchedule schedule_;
};

void Core::OnReply(Entry& entry, int64_t sent_at, int64_t margin,
                   absl::StatusOr<Lease> result) {
  if (entry.state == State::kLost && result.ok() && entry.release_late_renewal) {
    // The lease was declared lost, yet this late extend renewed the key:
    // nobody holds it now, so give it back instead of blocking others.
    ReleaseInBackground(*result);
    return;
  }
  // Stopped or released: the reply changes nothing.
  if (entry.state != State::kWatching) return;
  // (The caller's reference to `entry` keeps this Core alive.)
  const absl::Time now = loop_->Now();
  ReportRenewal(entry, result.status(), now - clock().At(sent_at),
                CompactTime::TicksDuration(margin));
  if (result.ok()) {
    if (now >= Deadline(entry)) {
      Lease renewed = *std::move(result);
      DeclareLost(entry, LateRenewalError(entry.resource(), now - Deadline(entry)));
      if (!shut_down_ && entry.release_late_renewal) ReleaseInBackground(renewed);
      return;
    }
    if (result->deadline > Deadline(entry)) {
      // Extend renews the lease; its resource and token stay the record's.
      entry.deadline = clock().Ticks(result->deadline);
      entry.ttl = CompactTime::DurationTicks(result->ttl);
      entry.fence = result->fence;
      entry.last_error = absl::OkStatus();
      schedule_.SetDeadline(entry, result->deadline);
      SetRenewAt(entry, std::max(now, result->deadline - result->ttl +
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

static void CoreAddRef(Core* core) { core->AddRef(); }
static void CoreUnref(Core* core) { core->Unref(); }

}  // namespace watchdog_internal

using watchdog_internal::Core;
using watchdog_internal::Entry;
using watchdog_internal::EntryRef;
using watchdog_internal::State;

// --- WatchHandle ---

WatchHandle::WatchHandle(EntryRef entry) : entry_(std::move(entry)) {}

WatchHandle::~WatchHandle() { Stop(); }

WatchHandle& WatchHandle::operator=(WatchHandle&& other) noexcept {
  if (this != &other) {
    Stop();
    entry_ = std::move(other.entry_);
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
  Core* core = entry_->core;
  if (core->shut_down()) return false;
  return core->loop()->Now() < core->clock().At(entry_->deadline);
}

Lease WatchHandle::lease() const { return entry_->MakeLease(entry_->core->clock()); }

void WatchHandle::Stop() {
  if (!entry_ || entry_->state != State::kWatching) return;
  entry_->state = State::kStopped;
  auto on_lost = std::move(entry_->on_lost);
  entry_->on_lost = nullptr;
  // A watching record's Core is not shut down (Shutdown orphans them all).
  entry_->core->Remove(*entry_);
}

absl::Status WatchHandle::Release(StatusCallback callback) {
  if (!entry_) {
    return absl::FailedPreconditionError("empty WatchHandle");
  }
  if (entry_->state == State::kReleased) {
    return absl::FailedPreconditionError("lease already released");
  }
  Core* core = entry_->core;
  if (core->shut_down()) {
    return absl::CancelledError("the Watchdog was destroyed");
  }
  // Renewal ends before the release is sent: nothing renews after it.
  if (entry_->state == State::kWatching) core->Remove(*entry_);
  const State before =
      entry_->state == State::kLost ? State::kLost : State::kStopped;
  entry_->state = State::kReleased;
  entry_->on_lost = nullptr;
  absl::Status status =
      core->lock()->Release(entry_->MakeLease(core->clock()), std::move(callback));
  if (!status.ok()) entry_->state = before;
  return status;
}

// --- Watchdog ---

Watchdog::Watchdog(EventLoop* loop, Lock* lock, WatchdogOptions options)
    : loop_(loop), lock_(lock), core_(new Core(loop, lock, options)) {
  core_->AddRef();
}

Watchdog::~Watchdog() {
  core_->Shutdown();
  core_->Unref();
}

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
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "Watch: renew_interval % must be below the ttl %",
                       {interval, lease.ttl});
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
  return WatchHandle(std::move(entry));
}

}  // namespace dlock
