// This header defines `Watchdog`, which keeps leases alive by renewing them
// on the host's `EventLoop` (no thread of its own), and `WatchHandle`, the
// holder's side of one watched lease.
//
//   Watchdog watchdog(&loop, &lock);            // any Lock: Simple, Reentrant,
//                                               // Retry, RedLock
//   WatchOptions options;
//   options.on_lost = [](absl::Status why) { /* stop using the resource */ };
//   absl::StatusOr<WatchHandle> watch = watchdog.Watch(lease, std::move(options));
//   ...
//   watch->Release([](absl::Status s) { ... });  // stop renewing, then unlock
//
// Renewal. Every `renew_interval` (default `lease.ttl / 3`) the watchdog
// calls `Lock::Extend(lease, lease.ttl)` -- only Extend, so it works for
// every policy. The local deadline it keeps is the one `Extend` returns:
// counted from when that extend was *sent*, minus the lock's drift
// allowance, so it is never later than the server-side expiry. A renewal is
// due at `deadline - ttl + renew_interval` of the latest renewed lease.
//
// Outcomes of a renewal:
//
//   Extend result                         | watchdog does
//   --------------------------------------+-----------------------------------
//   OK, before the local deadline         | adopts the new lease, schedules
//                                         | the next renewal
//   OK, at/after the local deadline       | lost (kDeadlineExceeded): a stall
//   (loop stalled, reply late)            | is never papered over; the renewed
//                                         | key is released in the background
//                                         | (WatchOptions::release_late_renewal)
//   kUnavailable / kDeadlineExceeded      | retried every `retry_interval`
//   (transient)                           | while the local deadline allows
//   no answer for `retry_interval`        | another extend is sent (a reply
//                                         | may be lost); the first success
//                                         | wins
//   anything else (kFailedPrecondition:   | lost at once with that status
//   not the owner; kAborted; kInternal;   |
//   kCancelled: lock/transport shut down) |
//
// Whatever happens to the replies, a timer at the local deadline declares
// the lease lost (kDeadlineExceeded) unless a renewal succeeded before it:
// `on_lost` therefore runs at the deadline at the latest, i.e. before the
// server-side key can expire, however long an extend's own timeout is. A
// timer that fires past the deadline (the loop stalled) declares the lease
// lost instead of renewing it.
//
// After `on_lost` the watch is over: nothing more is sent for that lease
// (apart from the release of a late successful renewal, see above), and a
// renewal reply that arrives later changes nothing. A lease lost at its
// deadline is NOT released by the watchdog (the server is unreachable or
// the outcome unknown; the key expires by itself): the holder may call
// `WatchHandle::Release()`.
//
// Stopping and releasing. `WatchHandle::Stop()` (or destroying the handle)
// ends renewal at once: no extend is sent afterwards, and the reply of an
// extend already in flight is ignored. `WatchHandle::Release()` stops
// renewal and then calls `Lock::Release`: no renewal is ever sent after the
// release. An extend sent *before* the release may still be in flight; the
// server decides the race by arrival order. Per server, both commands go on
// the same connection in order, so the release (sent later) executes after
// the extend and wins: the key is gone. The extend's reply is ignored, so it
// cannot resurrect the lease locally either.
//
// Many leases. All watched leases share ONE loop timer (an ordered schedule,
// not one timer per lease). When it fires, every renewal due within
// `WatchdogOptions::batch_window` is sent in the same loop turn, so the
// transport pipelines them into one write. Each watch is one allocation (the
// lease with its resource and token packed inside, the options, the
// schedule's two heap positions), two pointers in the schedule's heaps and
// the holder's one-pointer WatchHandle; 100,000 watches on one loop are
// routine (bench/RESULTS.md: the bytes per watched lease).
//
// Lifetimes. The loop and the lock must outlive the Watchdog and every
// operation it started. A WatchHandle may outlive its Watchdog: destroying
// the Watchdog ends every watch (renewal stops; `on_lost` is NOT called),
// after which the handle reports `active() == false`, `IsValid() == false`
// and `Release()` returns kCancelled. `on_lost` may destroy the handle or
// the Watchdog, release the lease, or start new watches.
//
// Observability: `WatchdogOptions::observer` (a LockObserver) gets
// OnRenewal for every renewal outcome (latency, margin left) and
// OnLeaseLost for every lost lease.
//
// Not thread-safe: call only on the thread running `loop`. Threaded
// programs use `BlockingLock` with `BlockingLockOptions::auto_renew`
// (dlock/blocking/blocking_lock.h): the blocking facade whose guards are
// renewed on its loop thread.
#ifndef DLOCK_WATCHDOG_WATCHDOG_H_
#define DLOCK_WATCHDOG_WATCHDOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

struct WatchdogOptions {
  // Renewals falling due within this window of the earliest due one are sent
  // together (so they are pipelined). A renewal may thus go out up to this
  // much (and at most a quarter of its renew_interval) early, never late.
  // Deadlines are never batched early.
  absl::Duration batch_window = absl::Milliseconds(5);
  // Where renewals (`OnRenewal`: outcome, latency, margin) and lost leases
  // (`OnLeaseLost`) are reported, on the loop (see dlock/lock/observer.h).
  // Not owned; must outlive the Watchdog. Null: report nothing.
  LockObserver* observer = nullptr;
};

struct WatchOptions {
  // Called once, on the loop, when the lease is lost (see the table in the
  // header comment): kFailedPrecondition (renewal refused: not the owner
  // any more), kDeadlineExceeded (the local deadline came before a renewal
  // succeeded, or the loop stalled past it), or the non-transient status of
  // the failed renewal. Never called after Stop()/Release() or once the
  // Watchdog is destroyed. May be empty (then poll IsValid()).
  absl::AnyInvocable<void(absl::Status) &&> on_lost;
  // Time between renewals. Zero: lease.ttl / 3. Must be < lease.ttl.
  absl::Duration renew_interval = absl::ZeroDuration();
  // Delay before retrying a renewal that failed transiently (or that has
  // had no answer for this long). Zero: min(lease.ttl / 10, 1 s), at least
  // 1 ms.
  absl::Duration retry_interval = absl::ZeroDuration();
  // When an extend sent before the lease was declared lost succeeds after
  // it (a late reply), the key now holds a fresh TTL that nobody uses:
  // release it (Lock::Release) so others need not wait a whole TTL. Turn
  // off for a ReentrantLock owner that holds the resource nested more than
  // once (its Release decrements the owner's count, and each nested holder
  // releases its own hold).
  bool release_late_renewal = true;
};

namespace watchdog_internal {
class Core;
struct Entry;

// A counted reference to an Entry (one watched lease): the handle, the
// Watchdog (while it renews the lease) and each extend in flight hold one.
// An intrusive count keeps the record one allocation with no control block.
// An Entry in turn holds a counted reference to its Core, so a handle can
// always ask whether its Watchdog is still there.
class EntryRef {
 public:
  EntryRef() = default;
  explicit EntryRef(Entry* entry);  // takes a new reference
  EntryRef(const EntryRef& other) : EntryRef(other.entry_) {}
  EntryRef(EntryRef&& other) noexcept : entry_(other.entry_) {
    other.entry_ = nullptr;
  }
  EntryRef& operator=(EntryRef other) noexcept {
    std::swap(entry_, other.entry_);
    return *this;
  }
  ~EntryRef();

  Entry* get() const { return entry_; }
  Entry* operator->() const { return entry_; }
  Entry& operator*() const { return *entry_; }
  explicit operator bool() const { return entry_ != nullptr; }

 private:
  Entry* entry_ = nullptr;
};
}  // namespace watchdog_internal

// The holder's side of one watch. Move-only. Destroying it stops renewal
// (like Stop()) but does not release the lease.
//
//   state     | active() | IsValid()              | on_lost
//   ----------+----------+------------------------+-------------------
//   watching  | true     | Now() < lease().deadline | may still run
//   lost      | false    | false                  | has run
//   stopped   | false    | Now() < lease().deadline | never runs
//   released  | false    | false                  | never runs
//
// A default-constructed or moved-from handle refers to nothing: inactive,
// not valid, Stop() does nothing, Release() returns kFailedPrecondition.
class WatchHandle {
 public:
  WatchHandle() = default;
  ~WatchHandle();
  WatchHandle(WatchHandle&& other) noexcept = default;
  WatchHandle& operator=(WatchHandle&& other) noexcept;
  WatchHandle(const WatchHandle&) = delete;
  WatchHandle& operator=(const WatchHandle&) = delete;

  // True while the watchdog renews this lease.
  bool active() const;
  // True unless the lease was lost or released (or the Watchdog is gone)
  // and the latest local deadline has not passed.
  bool IsValid() const;
  // True once on_lost has run (or would have, had it been set).
  bool lost() const;
  // The latest renewed lease (its deadline is the current local deadline),
  // by value: the watch keeps the lease packed (resource and token inside
  // its one record), not as a `Lease`. Stays readable after the watch
  // ended. Must not be called on an empty handle.
  Lease lease() const;

  // Ends renewal at once; the lease stays held on the server until its TTL
  // runs out (or the holder releases it). Idempotent.
  void Stop();

  // Ends renewal at once, then releases the lease through the watchdog's
  // Lock: returns what Lock::Release returns, and `callback` gets its
  // outcome (OK, or kFailedPrecondition when the key was no longer ours).
  // Also allowed after the lease was lost or the watch stopped (a lost lease
  // may still be on the server). kCancelled when the Watchdog is gone;
  // kFailedPrecondition on an empty handle or a second Release. On a non-OK
  // return the callback never runs.
  absl::Status Release(StatusCallback callback);

 private:
  friend class Watchdog;
  explicit WatchHandle(watchdog_internal::EntryRef entry);

  // One pointer: the record knows its Watchdog's core.
  watchdog_internal::EntryRef entry_;
};

class Watchdog {
 public:
  // `loop` and `lock` are not owned and must outlive this object and every
  // operation it started.
  Watchdog(EventLoop* loop, Lock* lock, WatchdogOptions options = {});
  // Ends every watch (no on_lost), cancels the loop timer. Replies of
  // extends in flight are ignored when they arrive.
  ~Watchdog();

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts renewing `lease` (as returned by Acquire or Extend of this
  // watchdog's Lock). The first renewal is due at
  // `lease.deadline - lease.ttl + renew_interval` (at once if that passed).
  // Returns kInvalidArgument for an empty resource or token, a ttl <= 0,
  // or a renew_interval/retry_interval < 0 or renew_interval >= ttl;
  // kDeadlineExceeded when `lease.deadline` has already passed (nothing to
  // keep alive). On error nothing is watched and on_lost never runs.
  absl::StatusOr<WatchHandle> Watch(const Lease& lease, WatchOptions options);

  // Number of leases being renewed.
  size_t watched() const;

  EventLoop* loop() const { return loop_; }
  Lock* lock() const { return lock_; }

 private:
  EventLoop* loop_;
  Lock* lock_;
  // Counted (intrusively): the Watchdog and every watch record hold one
  // reference, so a record outliving the Watchdog finds it shut down.
  watchdog_internal::Core* core_;
};

}  // namespace dlock

#endif  // DLOCK_WATCHDOG_WATCHDOG_H_
