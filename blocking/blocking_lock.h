// This header defines `BlockingLock` and `LockGuard`: the blocking facade
// for ordinary threaded programs, with optional auto-renewal. It does not
// implement locking itself: each call runs the async `Lock` (the same core
// loop hosts use) on the `LoopThread`'s loop, through `PostAndWait`
// (post_and_wait.h). On a UvLoopThread the calling thread runs the loop
// itself until its callback delivered the outcome (a caller turn: no
// hand-off to another thread, see dlock/transport/loop_thread.h); on a
// LoopThread without caller turns the call is posted and the calling
// thread sleeps. Either way "the loop thread" below is whichever thread
// runs the loop at that moment -- hooks and observer events may run on a
// thread that is inside a blocking call.
//
//   UvLoopThread thread;                            // //transport/uv
//   // Build the transport and the policy on the loop thread, e.g.
//   //   SimpleLock simple(thread.loop(), &transport);
//   //   RetryLock retry(thread.loop(), &simple);
//   BlockingLock locks(&thread, &retry);   // or, renewing every guard:
//   //   BlockingLockOptions options; options.auto_renew = true;
//   //   BlockingLock locks(&thread, &retry, std::move(options));
//   {
//     absl::StatusOr<LockGuard> guard =
//         locks.Lock("orders/42", absl::Seconds(10), absl::Seconds(3));
//     if (!guard.ok()) return guard.status();   // kDeadlineExceeded: busy
//     Use(guard->lease().fence);
//   }                                           // released here
//
// Waiting: `Lock()` passes `wait_timeout` as AcquireOptions::wait, so the
// wrapped lock decides how to wait; wrap a RetryLock (a SimpleLock makes
// every call a single attempt).
//
// ReentrantLock: when the options name no task id, the facade uses one per
// calling thread, so nested locks on one thread count up, and other threads
// of the process are other owners.
//
// Outcomes: those of the wrapped lock, plus kCancelled when the loop thread
// is stopping (the call could not be posted, or the loop was torn down
// before answering), and kFailedPrecondition when called on the loop thread
// itself (it would deadlock).
//
// Thread-safety: BlockingLock is thread-safe: any number of threads may
// call it at once. A LockGuard is thread-compatible (like
// std::unique_lock): one thread at a time; it may be moved to another thread.
//
// Shutdown (and destruction): `Shutdown()` -- run by the destructor --
// may start while other threads are inside TryLock/Lock/Acquire/Extend or a
// guard's Unlock/Release. Each such call returns its real result or
// kCancelled; none crashes or hangs. Shutdown:
//   1. closes the door: calls that begin from now on return kCancelled at
//      once, without touching the loop;
//   2. on the loop thread: cancels every Acquire in flight (its caller gets
//      kCancelled; the wrapped lock gives back whatever the attempt took, as
//      Cancel() promises), stops the renewal of every lease still held by a
//      guard and releases it (the guard's IsValid() turns false; a later
//      Unlock() returns kCancelled), and destroys the watchdog;
//   3. waits until every call that had begun has returned and every release
//      it sent was answered (bounded by the wrapped lock's timeouts).
// Guards may outlive the BlockingLock: their Unlock()/destructor then return
// kCancelled without touching it. A call that *begins* after the destructor
// returned is a use-after-destroy bug, as with any object.
//
// Lifetime: `thread` and `lock` must outlive the BlockingLock (or at least
// its Shutdown()); the loop thread must still run posted functions when
// Shutdown() runs. Never destroy it on the loop thread while blocking calls
// are in flight.
//
// Auto-renewal (`BlockingLockOptions::auto_renew`): every guard handed out
// is watched by a `Watchdog` on the loop thread, so a holder may keep a lock
// longer than its TTL. The guard's `IsValid()` turns false as soon as the
// watchdog declares the lease lost (renewal refused, or the local deadline
// came before a renewal succeeded), which happens before the server-side key
// can expire -- as timely as the loop thread: unless that thread is blocked,
// at the local deadline at the latest. `Unlock()`/the destructor stop
// renewal before the release is sent (no renewal after a release);
// `LockGuard::Release()` (detach) stops renewal and hands the lease over.
// `guard.lease()` is the lease as acquired; the renewed deadline lives on
// the loop thread. A lease whose local deadline had already passed when it
// was acquired (a very late reply) is handed out already invalid.
// Without auto-renewal a guard's lease simply expires after its ttl
// (extend it with `Extend`).
#ifndef DLOCK_BLOCKING_BLOCKING_LOCK_H_
#define DLOCK_BLOCKING_BLOCKING_LOCK_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {

class BlockingLock;

// Shared by a BlockingLock and every guard it returned, so a guard may
// outlive the BlockingLock (see "Shutdown" above). Defined in the .cc.
struct BlockingLockGate;

// What a guard shares with the loop thread (lease, lost flag, renewal),
// and the loop thread's record of the leases guards hold. Defined in
// held_leases.h (internal).
struct GuardState;
class HeldLeases;
// Loop thread: acquisitions in flight. Defined in acquires_in_flight.h.
class AcquiresInFlight;

// Auto-renewal settings (see "Auto-renewal" above).
struct RenewalOptions {
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

struct BlockingLockOptions {
  // True: every guard's lease is renewed while held (see "Auto-renewal").
  // False (the default): a guard's lease expires after its ttl.
  bool auto_renew = false;
  // Used when `auto_renew` is true.
  RenewalOptions renewal;
};

// Owns one acquired lease; releases it when destroyed (like std::unique_lock).
class LockGuard {
 public:
  // Owns nothing.
  LockGuard() = default;
  LockGuard(LockGuard&& other) noexcept;
  // Releases what this guard owns (ignoring the outcome), then takes over.
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  // Releases the lease if still owned; the outcome is ignored (use Unlock()
  // to see it). Blocks until the release was answered.
  ~LockGuard();

  bool owns_lock() const { return state_ != nullptr; }
  explicit operator bool() const { return owns_lock(); }

  // The lease. Requires owns_lock().
  const Lease& lease() const;

  // False when nothing is owned, or the lease is known lost (auto-renewal
  // said so, or Shutdown released it). Without auto-renewal, this cannot
  // notice expiry on the server: compare lease().deadline with the loop's
  // clock for that.
  bool IsValid() const;

  // Releases now and reports the outcome: OK; kFailedPrecondition when the
  // lease no longer owned the key (it expired and maybe someone else holds
  // it: whatever was protected may have been touched concurrently), or when
  // the guard owns nothing; kUnavailable / kDeadlineExceeded when unknown
  // (the key expires by its TTL); kCancelled when the loop is stopping or
  // the BlockingLock shut down (which released the lease).
  // Afterwards the guard owns nothing, whatever the outcome.
  absl::Status Unlock();

  // Gives up ownership without releasing (like std::unique_lock::release):
  // the caller becomes responsible for the lease.
  Lease Release();

 private:
  friend class BlockingLock;
  LockGuard(BlockingLock* owner, std::shared_ptr<BlockingLockGate> gate,
            std::shared_ptr<GuardState> state)
      : owner_(owner), gate_(std::move(gate)), state_(std::move(state)) {}

  // Valid only while the gate lets calls in.
  BlockingLock* owner_ = nullptr;
  std::shared_ptr<BlockingLockGate> gate_;
  std::shared_ptr<GuardState> state_;
};

class BlockingLock {
 public:
  // `lock` must have been built for `thread->loop()` (its loop and
  // transport live on that thread).
  BlockingLock(LoopThread* thread, Lock* lock, BlockingLockOptions options = {});
  // Runs Shutdown().
  ~BlockingLock();

  BlockingLock(const BlockingLock&) = delete;
  BlockingLock& operator=(const BlockingLock&) = delete;

  // One attempt: a guard, or kAborted when held by another owner (or the
  // wrapped lock's other errors). kInvalidArgument for a bad resource/ttl.
  absl::StatusOr<LockGuard> TryLock(absl::string_view resource, absl::Duration ttl);

  // Waits up to `wait_timeout` (through the wrapped lock, see above).
  absl::StatusOr<LockGuard> Lock(absl::string_view resource, absl::Duration ttl,
                                 absl::Duration wait_timeout);

  // Full control over the options (task id, ttl, wait).
  absl::StatusOr<LockGuard> Acquire(absl::string_view resource, AcquireOptions options);

  // All-or-nothing over several resources: a MultiLock (lock/multi_lock.h)
  // over the wrapped lock, on the loop thread -- taken in sorted order, so
  // the guards come back in that order; `options.wait` bounds the whole
  // acquisition; on any failure everything taken was released before this
  // returns. One guard per resource, each renewed like any guard (see
  // MultiLockGuard for one object holding them). kInvalidArgument for an
  // empty list or a duplicate resource.
  absl::StatusOr<std::vector<LockGuard>> AcquireAll(std::vector<std::string> resources,
                                                    AcquireOptions options);

  // Blocking Extend of a guard's lease (e.g. without auto-renewal). On OK
  // the guard's lease keeps its old fields; the new lease is returned.
  absl::StatusOr<Lease> Extend(const LockGuard& guard, absl::Duration ttl);

  // See "Shutdown" above. Thread-safe and idempotent: a second call waits
  // for the first to finish. Must not be called on the loop thread (it
  // would have to wait for that thread): there it does the loop-side part
  // and returns without waiting.
  void Shutdown();

  LoopThread* thread() const { return thread_; }
  dlock::Lock* lock() const { return lock_; }

 private:
  friend class LockGuard;
  absl::Status ReleaseState(std::shared_ptr<GuardState> state);
  // Loop thread: the loop-side part of Shutdown().
  void ShutdownOnLoop();
  // Acquire and AcquireAll: runs `start` on the loop thread with the
  // options (task id defaulted) and a callback for the leases; `start`
  // calls the wrapped lock (or a MultiLock over it) and returns its handle,
  // which Shutdown cancels while the call is in flight. The leases become
  // guards (renewed when auto_renew).
  using StartAcquire = absl::AnyInvocable<absl::StatusOr<AcquireHandle>(
      const AcquireOptions& options, MultiLeaseCallback callback)>;
  absl::StatusOr<std::vector<LockGuard>> AcquireGuards(AcquireOptions options,
                                                       StartAcquire start);

  LoopThread* thread_;
  dlock::Lock* lock_;
  std::shared_ptr<BlockingLockGate> gate_;
  // Loop thread only.
  bool shut_down_ = false;
  // Loop thread only: acquires accepted by the wrapped lock and not
  // answered yet (Shutdown cancels them).
  std::unique_ptr<AcquiresInFlight> acquires_;
  // Loop thread only (or the destructor, when the loop thread was gone):
  // the leases guards hold, renewed when auto_renew.
  std::unique_ptr<HeldLeases> held_;
};

// A process-unique id of the calling thread ("thread-<n>"), used as the
// default ReentrantLock task id by the facade.
std::string CurrentThreadTaskId();

}  // namespace dlock

#endif  // DLOCK_BLOCKING_BLOCKING_LOCK_H_
