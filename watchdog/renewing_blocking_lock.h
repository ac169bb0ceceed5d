// This header defines `RenewingBlockingLock`: the blocking facade
// (`BlockingLock`, dlock/lock/blocking_lock.h) with auto-renewal. Every
// guard it hands out is watched by a `Watchdog` running on the facade's loop
// thread, so a holder may keep a lock longer than its TTL; the guard's
// `IsValid()` turns false as soon as the watchdog declares the lease lost
// (renewal refused, or the local deadline came before a renewal succeeded),
// which happens before the server-side key can expire.
//
//   UvLoopThread thread(...);
//   SimpleLock simple(thread.loop(), &transport);    // built on the loop thread
//   RenewingBlockingLock locks(&thread, &simple);
//   absl::StatusOr<LockGuard> guard = locks.TryLock("jobs/nightly", absl::Seconds(5));
//   while (guard.ok() && guard->IsValid() && MoreWork()) DoSomeWork();
//   // ~LockGuard: renewal stops on the loop thread, then the lease is released.
//
// Guards keep the `BlockingLock` semantics: `Unlock()`/the destructor stop
// renewal before the release is sent (no renewal after a release);
// `LockGuard::Release()` (detach) stops renewal and hands the lease over.
// `guard.lease()` is the lease as acquired; the renewed deadline lives on
// the loop thread (use `IsValid()`).
//
// `IsValid()` is only as timely as the loop thread: on_lost runs there, at
// the local deadline at the latest, unless that thread itself is blocked.
//
// A lease whose local deadline had already passed when it was acquired (a
// very late reply) is handed out already invalid (`IsValid()` false).
//
// Thread-safety: as BlockingLock (thread-safe). Lifetime: `thread` and
// `lock` must outlive this object (or at least its Shutdown()), and it must
// be destroyed while the loop thread still runs (the destructor releases
// held leases and tears the watchdog down on that thread, and waits for
// it). Guards may outlive it (see BlockingLock's "Shutdown").
#ifndef DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_
#define DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/blocking_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {

struct RenewingBlockingLockOptions {
  // Options of the watchdog (batching, observer). An observer runs on the
  // loop thread.
  WatchdogOptions watchdog;
  // Per guard, as WatchOptions: zero means ttl / 3 and min(ttl / 10, 1 s).
  absl::Duration renew_interval = absl::ZeroDuration();
  absl::Duration retry_interval = absl::ZeroDuration();
  // Called on the LOOP thread when a guard's lease is lost, after the
  // guard's IsValid() turned false. Must not block. May be empty.
  absl::AnyInvocable<void(const Lease& lease, const absl::Status& why)> on_lost;
};

class RenewingBlockingLock : public BlockingLock {
 public:
  RenewingBlockingLock(LoopThread* thread, dlock::Lock* lock,
                       RenewingBlockingLockOptions options = {});
  // Runs Shutdown() (see BlockingLock): held leases are released and the
  // watchdog is destroyed on the loop thread (waits for it).
  ~RenewingBlockingLock() override;

 protected:
  // Loop thread: starts watching the lease, wires on_lost to the guard's
  // `lost` flag and `before_release` to stopping the watch.
  void OnAcquired(const std::shared_ptr<GuardState>& state) override;
  // Loop thread: destroys the watchdog.
  void OnShutdown() override;

 private:
  RenewingBlockingLockOptions options_;
  // Created (lazily) and destroyed on the loop thread.
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace dlock

#endif  // DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_
