// This header defines `Lock`, the interface every dlock lock policy
// implements, and the `Lease` it hands out.
//
// Policies (each in its own header): `SimpleLock` (one SET NX PX attempt),
// `RetryLock` (wraps any Lock: waits with backoff, woken by release
// notifications), `ReentrantLock` (owner-counted), `FairLock` (waits in a
// first-come-first-served queue on the server), `RedLock` (//redlock,
// quorum over N servers). The blocking facade (blocking_lock.h) wraps any of
// them for threaded programs.
//
// A lease is in one of three states:
//
//   state    | server key          | Release        | Extend
//   ---------+---------------------+----------------+---------------------
//   Held     | holds lease.token   | OK, key gone   | OK, new deadline
//   Expired  | gone or another's   | kFailedPrecon. | kFailedPrecondition
//   Released | gone or another's   | kFailedPrecon. | kFailedPrecondition
//
// `lease.deadline` is the holder's *local* bound: counted on the loop's
// monotonic clock from when the acquiring command was sent, minus a drift
// allowance, so it is never later than the server-side expiry.
//
// Errors (every policy, every method; the callback's status unless noted):
//
//   situation                                           | code
//   ----------------------------------------------------+---------------------
//   held by another owner                               | kAborted
//   release/extend: the lease no longer owns the key    | kFailedPrecondition
//   not connected, connection lost; transient server    | kUnavailable
//     error (READONLY, OOM, LOADING, BUSY, MASTERDOWN,  |   (RetryLock retries)
//     TRYAGAIN, CLUSTERDOWN, NOREPLICAS, MISCONF, max   |
//     number of clients); fewer replicas acknowledged   |
//     a grant/extend than replica_ack.min_replicas      |
//     asked (IsReplicaShortfall; the key is released)   |
//   no reply in time; lease deadline passed             | kDeadlineExceeded
//   ACL refusal (NOPERM, NOAUTH, WRONGPASS, or a script | kPermissionDenied
//     call the user may not make)                       |   (permanent)
//   foreign data under a lock/fence key (WRONGTYPE, not | kInternal
//     an integer), fence counter at int64 max, unknown  |   (permanent)
//     command, script error, unknown error code         |
//   cancelled, shutdown                                 | kCancelled
//   bad argument (resource; ttl outside [10 ms, max],   | kInvalidArgument,
//     see ValidateLeaseTtl; ...)                        |   from the call
//
// The mapping of server error replies is ErrorReplyStatus (reply_status.h).
//
// Async contract (all methods): a bad argument is rejected by the call
// itself (non-OK Status returned) and the callback never runs; otherwise the
// callback runs exactly once, on the loop, never inside the call.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_LOCK_H_
#define DLOCK_LOCK_LOCK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

struct Lease {
  // What was locked, as the caller named it (without key prefix).
  std::string resource;
  // The value that proves ownership on the server: at least 128 random bits,
  // fresh for every acquisition (for ReentrantLock: the owner id).
  std::string token;
  // Fencing token: the server's fence mark + 1 (docs/fences.md). Strictly
  // increases across successive holders of one resource; pass it to the
  // protected resource so it can reject a stale holder. 0 when the lock's
  // options switched fencing off.
  int64_t fence = 0;
  // The TTL the server key was last set with.
  absl::Duration ttl;
  // Local monotonic deadline (EventLoop::Now() scale): the holder must stop
  // relying on the lock at this time unless it extended the lease.
  absl::Time deadline;
};

struct AcquireOptions {
  // Lease time-to-live on the server: whole milliseconds (a fraction is
  // truncated) in [kMinLeaseTtl = 10 ms, the policy's maximum]; see
  // ValidateLeaseTtl in lease_rules.h.
  absl::Duration ttl = absl::Seconds(30);
  // How long the policy may keep trying for the lock. RetryLock: zero means
  // one attempt. RedLock: zero means its configured `retry_count` retries
  // (set `retry_count = 0` for a single try); positive means retry until
  // this much time has passed. Ignored by SimpleLock and ReentrantLock.
  absl::Duration wait = absl::ZeroDuration();
  // ReentrantLock: the task that owns the lock on this client (event-loop
  // hosts have no thread identity). Ignored by other policies.
  std::string task_id;
};

using LeaseCallback = absl::AnyInvocable<void(absl::StatusOr<Lease>) &&>;
using StatusCallback = absl::AnyInvocable<void(absl::Status) &&>;

// Something in flight that can be cancelled.
class Cancellable {
 public:
  virtual ~Cancellable() = default;
  // True: the callback will never run (destroyed before Cancel returns), and
  // anything the operation may have taken on the server is released in the
  // background. False: the callback already ran or is running.
  virtual bool Cancel() = 0;
};

// Returned by Acquire. Copyable; does not keep the operation alive: once
// the operation finished, Cancel() returns false. A default-constructed
// handle refers to nothing.
class AcquireHandle {
 public:
  AcquireHandle() = default;
  explicit AcquireHandle(std::weak_ptr<Cancellable> op) : op_(std::move(op)) {}

  bool Cancel() {
    std::shared_ptr<Cancellable> op = op_.lock();
    return op != nullptr && op->Cancel();
  }

 private:
  std::weak_ptr<Cancellable> op_;
};

class Transport;

// Implemented by a lock whose releases publish a notification on a pub/sub
// channel (SimpleLock, ReentrantLock). RetryLock learns from it where to
// wait for a release, so it need not be told the wrapped lock's key prefix
// or be handed a separate subscriber transport.
class ReleaseNotifier {
 public:
  virtual ~ReleaseNotifier() = default;
  // The channel a release of `resource` publishes on (for dlock's keys:
  // KeyScheme::ChannelKey).
  virtual std::string ReleaseChannel(absl::string_view resource) const = 0;
  // The transport to SUBSCRIBE on (the lock's own; it must outlive the
  // lock). nullptr: none, the waiter polls with backoff.
  virtual Transport* ReleaseSubscriber() const = 0;

  // The cross-client hand-off queue (docs/handoff.md; SimpleLock has it,
  // the defaults below say "none": RetryLock then wakes every client's
  // oldest waiter per release, as before).
  // The lock key of `resource` (the queue's scripts name it in KEYS); empty
  // when the lock has no hand-off queue.
  virtual std::string HandOffLockKey(absl::string_view resource) const {
    (void)resource;
    return std::string();
  }
  // The transport to run the queue's scripts on (the lock's own).
  virtual Transport* HandOffTransport() const { return nullptr; }
  // Releases `lease` as Lock::Release does (same outcomes and reporting).
  // hand_off false: the plain release's work, and `on_listeners` (when set)
  // hears, before `callback` runs, how many clients its notification
  // reached. hand_off true: HandOffReleaseScript -- the lock goes to the
  // oldest live waiter of the queue, and `waiter_id`'s entry leaves it
  // (back at the tail when `rejoin`, expiry `entry_ttl`: then
  // `on_listeners` runs, before `callback`, if the entry did go back -- the
  // lock was handed to another client).
  // kUnimplemented when unsupported.
  struct HandOffRelease {
    bool hand_off = false;
    std::string waiter_id;
    bool rejoin = false;
    absl::Duration entry_ttl;
    absl::AnyInvocable<void(int64_t listeners) &&> on_listeners;
  };
  virtual absl::Status ReleaseForHandOff(const Lease& lease, HandOffRelease how,
                                         StatusCallback callback) const {
    (void)lease;
    (void)how;
    (void)callback;
    return absl::UnimplementedError("no hand-off queue");
  }
};

class Lock {
 public:
  virtual ~Lock() = default;

  // How this lock's releases are announced; nullptr (the default) when they
  // are not: RetryLock then polls with backoff.
  virtual const ReleaseNotifier* release_notifier() const { return nullptr; }

  // Tries to take `resource`. On success the callback gets the Lease. Errors:
  // kAborted (held by another owner), kUnavailable (server down or a
  // transient error reply), kDeadlineExceeded (no answer in time; nothing is
  // left behind: the token sent is released), kPermissionDenied (ACL),
  // kCancelled (shutdown), kInternal (foreign data under the key, other
  // permanent server errors). Returns kInvalidArgument for an empty or too
  // long resource or a bad ttl.
  virtual absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                                const AcquireOptions& options,
                                                LeaseCallback callback) = 0;

  // The argument checks Acquire(resource, options) makes from the call,
  // without sending anything: OK if it would accept them, else the
  // kInvalidArgument it would return (e.g. a ttl outside this lock's range
  // under its own drift options). kUnimplemented (the default): the lock does
  // not say -- a RetryLock that queues a wait without an attempt then checks
  // the ttl by the common rule (ValidateTtl) instead.
  virtual absl::Status CheckAcquireArgs(absl::string_view resource,
                                        const AcquireOptions& options) const {
    (void)resource;
    (void)options;
    return absl::UnimplementedError("no argument check");
  }

  // Releases the lease if it still owns the key (compare-and-delete, atomic
  // on the server). kFailedPrecondition if the key is gone or owned by
  // someone else (then nothing is touched). A release whose notification
  // the server refused (an ACL user without channel permission) deleted the
  // key all the same: OK, with ReleaseEvent::warning set (observer.h).
  virtual absl::Status Release(const Lease& lease, StatusCallback callback) = 0;

  // Sets the key's TTL to `ttl` if the lease still owns it (ReentrantLock
  // only raises it: the key also covers the owner's other holds). On success
  // the callback gets the lease with ttl = `ttl` and deadline = send time +
  // ttl - drift, never later than the key's expiry. kFailedPrecondition if it
  // no longer owns the key.
  virtual absl::Status Extend(const Lease& lease, absl::Duration ttl,
                              LeaseCallback callback) = 0;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LOCK_H_
