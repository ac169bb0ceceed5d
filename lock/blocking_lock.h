// This header defines `BlockingLock` and `LockGuard`: the blocking facade
// for ordinary threaded programs. It does not implement locking itself: each
// call is posted to a `LoopThread` and runs the async `Lock` there (the same
// core loop hosts use); the calling thread sleeps on a condition variable
// until the callback delivers the outcome.
//
//   UvLoopThread thread(...);                       // //transport/uv
//   // Build the transport and the policy on the loop thread, e.g.
//   //   SimpleLock simple(thread.loop(), &transport);
//   //   RetryLock retry(thread.loop(), &simple, &transport);
//   BlockingLock locks(&thread, &retry);
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
//      Unlock() returns kCancelled), and runs OnShutdown();
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
// Auto-renewal hook: every guard shares a `GuardState` with the loop thread.
// A subclass (e.g. the watchdog integration) overrides `OnAcquired()` to
// start renewing, marks the state lost when renewal fails, and sets
// `before_release` to stop renewal; `LockGuard::IsValid()` reports it.
#ifndef DLOCK_LOCK_BLOCKING_LOCK_H_
#define DLOCK_LOCK_BLOCKING_LOCK_H_

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/loop_thread.h"

namespace dlock {

class BlockingLock;

// Shared by a BlockingLock and every guard it returned, so a guard may
// outlive the BlockingLock (see "Shutdown" above). Defined in the .cc.
struct BlockingLockGate;

// What a guard shares with the loop thread. Owned jointly by the guard
// (caller thread) and whatever a hook keeps on the loop thread; fields other
// than `lost` are touched only on the loop thread once the guard exists
// (`lease` is read-only).
struct GuardState {
  // The lease as acquired. Immutable after the guard is returned.
  Lease lease;
  // Set (from any thread) when the lease is known to be lost, e.g. by a
  // renewal hook whose renewal was refused.
  std::atomic<bool> lost{false};
  // Runs on the loop thread right before the release is sent (and also when
  // the guard is detached). Hooks use it to stop renewing. May be empty.
  // Set only on the loop thread.
  absl::AnyInvocable<void() &&> before_release;
  // Set when the facade's Shutdown() released this lease (then `lost` is
  // set too).
  std::atomic<bool> released_at_shutdown{false};
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
  const Lease& lease() const { return state_->lease; }

  // False when nothing is owned, or the lease is known lost (a renewal hook
  // said so). Without a hook, this cannot notice expiry on the server:
  // compare lease().deadline with the loop's clock for that.
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
  BlockingLock(LoopThread* thread, Lock* lock);
  // Runs Shutdown().
  virtual ~BlockingLock();

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

  // Blocking Extend of a guard's lease (e.g. without a renewal hook). On OK
  // the guard's lease keeps its old fields; the new lease is returned.
  absl::StatusOr<Lease> Extend(const LockGuard& guard, absl::Duration ttl);

  // See "Shutdown" above. Thread-safe and idempotent: a second call waits
  // for the first to finish. Must not be called on the loop thread (it
  // would have to wait for that thread): there it does the loop-side part
  // and returns without waiting.
  void Shutdown();

  LoopThread* thread() const { return thread_; }
  dlock::Lock* lock() const { return lock_; }

 protected:
  // Runs on the loop thread once a lease was acquired, before the guard is
  // handed to the caller. The default does nothing. Overrides may start
  // renewal and set `state->before_release`.
  virtual void OnAcquired(const std::shared_ptr<GuardState>& state) {}

  // Runs on the loop thread during Shutdown(), after every held lease was
  // released; OnAcquired never runs afterwards. The default does nothing.
  // A subclass whose destructor needs it must call Shutdown() itself first.
  virtual void OnShutdown() {}

 private:
  friend class LockGuard;
  absl::Status ReleaseState(std::shared_ptr<GuardState> state);
  // Loop thread: the loop-side part of Shutdown().
  void ShutdownOnLoop();

  LoopThread* thread_;
  dlock::Lock* lock_;
  std::shared_ptr<BlockingLockGate> gate_;
  // Loop thread only.
  bool shut_down_ = false;
  // Acquires accepted by the wrapped lock and not answered yet, by call.
  std::unordered_map<const void*, AcquireHandle> acquiring_;
  // Leases held by guards (acquired, not yet released or detached). Strong
  // references: a guard whose Unlock the closed gate refused drops its own,
  // and Shutdown still releases the lease.
  std::unordered_map<const GuardState*, std::shared_ptr<GuardState>> held_;
};

// A process-unique id of the calling thread ("thread-<n>"), used as the
// default ReentrantLock task id by the facade.
std::string CurrentThreadTaskId();

}  // namespace dlock

#endif  // DLOCK_LOCK_BLOCKING_LOCK_H_
