// Internal to //blocking:blocking_lock. This header defines `GuardState`,
// what a LockGuard shares with the loop thread, and `HeldLeases`: on the
// loop thread, the leases BlockingLock's guards hold and their renewal. It
// adopts each newly acquired lease (watched by a `Watchdog` when
// `auto_renew`), stops renewing and forgets one when its guard unlocks or
// detaches it, and at shutdown marks every one lost and releases it.
//
// Not thread-safe: call only on the loop thread (except as ReleaseAll
// says). The GuardState fields that other threads read are atomics.
#ifndef DLOCK_BLOCKING_HELD_LEASES_H_
#define DLOCK_BLOCKING_HELD_LEASES_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "absl/status/status.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {

// What a guard shares with the loop thread. `lease` is immutable once the
// guard exists; `lost` and `released_at_shutdown` may be read from any
// thread; `watch` is touched only on the loop thread.
struct GuardState {
  Lease lease;
  // Set when the lease is known lost (renewal failed, or Shutdown released
  // it).
  std::atomic<bool> lost{false};
  // Set when Shutdown() released this lease (then `lost` is set too).
  std::atomic<bool> released_at_shutdown{false};
  // Loop thread only: the renewal (auto_renew), stopped before the release
  // is sent and on detach. A stopped handle's destructor touches nothing
  // shared, so the state may be freed on any thread afterwards.
  std::optional<WatchHandle> watch;

  void StopRenewal() {
    if (watch.has_value()) watch->Stop();
  }
};

class HeldLeases {
 public:
  // `loop` and `lock` must outlive this object; `lock` runs on `loop`.
  HeldLeases(EventLoop* loop, Lock* lock, bool auto_renew, RenewalOptions renewal)
      : loop_(loop), lock_(lock), auto_renew_(auto_renew), renewal_(std::move(renewal)) {}
  HeldLeases(const HeldLeases&) = delete;
  HeldLeases& operator=(const HeldLeases&) = delete;
  // The watchdog goes first (every watch is stopped by then, see ReleaseAll).
  ~HeldLeases() { watchdog_.reset(); }

  // A newly acquired lease: held, and renewed when auto_renew. A lease the
  // watchdog refuses (its local deadline already passed) is handed out
  // already lost.
  std::shared_ptr<GuardState> Adopt(Lease lease);

  // Its guard detached it: stops renewing and forgets it (the caller owns
  // the lease now; ReleaseAll will not release it).
  void Forget(GuardState* state);

  // Its guard unlocks it: Forget, then sends the release (renewal stops
  // before the release is sent). Returns Lock::Release's result; on
  // rejection `callback` was destroyed without running.
  absl::Status Release(GuardState* state, StatusCallback callback);

  // Shutdown: marks every lease held lost and released at shutdown, stops
  // its renewal and, when `can_send` (on the loop thread), releases it:
  // `begun()` before each release is sent, `ended()` when it was answered
  // or refused. Then destroys the watchdog (when `can_send`; otherwise the
  // destructor does, once the loop is quiet). Also callable off the loop
  // thread with `can_send` false, when the loop runs nothing more of ours.
  void ReleaseAll(bool can_send, const std::function<void()>& begun,
                  const std::function<void()>& ended);

 private:
  // Starts renewing `state`'s lease (auto_renew).
  void StartRenewal(const std::shared_ptr<GuardState>& state);

  EventLoop* const loop_;
  Lock* const lock_;
  const bool auto_renew_;
  RenewalOptions renewal_;  // on_lost is called: not const
  // Leases held by guards (acquired, not yet released or detached). Strong
  // references: a guard whose Unlock the closed gate refused drops its own,
  // and ReleaseAll still releases the lease.
  std::unordered_map<const GuardState*, std::shared_ptr<GuardState>> held_;
  // Created on the first renewed guard.
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace dlock

#endif  // DLOCK_BLOCKING_HELD_LEASES_H_
