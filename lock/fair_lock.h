// This header defines `FairLock`: a single-server lock policy that grants a
// busy resource first-come-first-served across processes. Waiters queue on
// the server (fair_scripts.h: a hash of waiters beside the plain lock key,
// each entry with its own expiry), a release notifies only the head of the
// queue, and nobody -- a newcomer, a TryLock, a waiter further back -- can
// take the lock while a live waiter is ahead of it.
//
//   FairLock lock(&loop, &transport);
//   lock.Acquire("orders/42", {.ttl = absl::Seconds(10), .wait = absl::Seconds(30)},
//                [](absl::StatusOr<Lease> lease) { ... });
//
// Acquire with `wait` > 0 WAITS ITSELF (do not wrap it in RetryLock: a
// RetryLock makes attempts with wait 0, which never queue):
//   - The first attempt either takes the lock (free and nobody queued) or
//     joins the queue (a new ticket, behind every live waiter).
//   - The waiter then waits for a notification on this FairLock's own
//     channel (one SUBSCRIBE per FairLock, kept for its lifetime): the
//     release script, and any acquire that finds the lock free while it is
//     not the head, publish the head's id there. On it, the waiter makes
//     one attempt, which takes the lock (its place is guaranteed: the key
//     stays free for the head until its entry expires). So each grant
//     costs the waiter one wake-up attempt, and each release wakes exactly
//     one process (exactly one waiter).
//   - While waiting, the waiter refreshes its entry every queue_ttl / 3
//     (the same acquire script: it also takes the lock should it be free
//     and this waiter the head, e.g. after a lost notification).
//   - Bound on a dead waiter: a waiter that crashed, hung or was cut off
//     holds the line for at most `queue_ttl` after its last refresh; then
//     its entry expires and the next call of either script drops it (the
//     live waiters' refreshes are such calls, so the next live head takes
//     the lock at most queue_ttl + queue_ttl / 3 after the dead waiter's
//     last refresh). A waiter whose notification was lost takes the lock at
//     most queue_ttl / 3 late.
//   - The wait is a hard bound: at `start + wait` the callback gets
//     kDeadlineExceeded (position in the queue in the message); an attempt
//     in flight is abandoned (its token released should it have been
//     granted) and the queue entry removed, in the background.
//   - Transient failures (kUnavailable, kDeadlineExceeded of one attempt,
//     a young data set) are retried at the next refresh until the wait
//     ends; a lost reply's token is released in the background (the waiter
//     may then lose its place and queue again at the back). Other errors
//     end the wait at once (the entry is removed).
//   - Cancel() on the handle: the callback never runs; the entry is removed
//     (and the next waiter notified if the lock is free) in the background.
// Acquire with `wait` == 0 is one try that never queues: the Lease if the
// lock is free and nobody is queued; kAborted if it is held or live waiters
// are queued (a TryLock never barges either).
//
// Leases are plain dlock leases: own token (fresh per attempt), TTL, fence
// (the shared P{R}:fence counter), deadline = send time of the granting
// attempt + ttl - drift; Extend is compare-and-PEXPIRE (ExtendScript), so
// //watchdog renews them; Release is by token (FairRelease: delete if ours,
// then notify the head). The restart rule and fences after a data-loss
// restart are AcquireScript's (scripts.h). Errors: lock.h's table.
//
// Fairness holds among FairLock users of a resource. A SimpleLock or
// ReentrantLock on the same prefix and resource still excludes (same lock
// key), but its acquire ignores the queue and its release wakes nobody in
// it: do not mix them on one resource.
//
// Cost: each script reads the queue hash whole (HGETALL), O(waiters): meant
// for queues of up to some hundreds of waiters per resource.
//
// Lifetime: `loop` and `transport` must outlive this object. Destroying it
// cancels every pending wait (callbacks never run; entries removed in the
// background) and drops its subscription; Release/Extend in flight
// complete normally.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_FAIR_LOCK_H_
#define DLOCK_LOCK_FAIR_LOCK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// SimpleLockOptions' fields (key prefix -- FairLocks that queue together
// need the same one --, per-command timeout, drift, restart window,
// observer: policy "fair", OnAcquire with attempts and waited for a wait,
// OnAcquireWait each time a wait's attempt queued), plus the queue's.
struct FairLockOptions : SimpleLockOptions {
  // How long a queue entry lives without a refresh: the bound on how long a
  // dead waiter holds the line. Live waiters refresh every queue_ttl / 3.
  // Whole milliseconds, at least 30 ms (else Acquire with a wait returns
  // kInvalidArgument). Keep it well above a round trip plus loop stalls: a
  // live waiter that misses its refreshes for this long loses its place.
  absl::Duration queue_ttl = absl::Seconds(3);
};

class FairLock : public Lock {
 public:
  FairLock(EventLoop* loop, Transport* transport,
           FairLockOptions options = FairLockOptions());
  ~FairLock() override;

  FairLock(const FairLock&) = delete;
  FairLock& operator=(const FairLock&) = delete;

  // See above. Returns kInvalidArgument for a bad resource, ttl
  // (ValidateLeaseTtl), negative wait or (with a wait) queue_ttl < 30 ms,
  // replica_ack.min_replicas != 0 (not supported by the fair scripts; also
  // from Extend),
  // or the transport's rejection of the first attempt; the callback then
  // never runs.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;

  // Compare-and-delete, then notify the queue's head. As SimpleLock's:
  // OK (ReleaseEvent::warning if the notification was refused),
  // kFailedPrecondition, kUnavailable / kDeadlineExceeded (unknown).
  absl::Status Release(const Lease& lease, StatusCallback callback) override;

  // Compare-and-PEXPIRE, as SimpleLock's.
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  // Observability for tests and tools.
  // FairAcquire scripts sent by this lock's Acquires (tries, first
  // attempts, wake-ups and refreshes).
  int64_t attempts() const;
  // Waits in progress.
  size_t waiting() const;
  // This lock's waiter-id prefix (random, 128 bits): its waiters are
  // "<instance_id>:<wait id>" in the queue.
  const std::string& instance_id() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_FAIR_LOCK_H_
