// This header defines `ReentrantLock`: an owner-counted lock. The server key
// P{R} is a hash {owner -> count}; owner = client id + ":" + task id
// (`AcquireOptions::task_id`; event-loop hosts have no thread identity, so
// the task is named explicitly; an empty task id is allowed and means "the
// client as a whole").
//
//   operation                 | key state             | result
//   --------------------------+-----------------------+---------------------------
//   Acquire                   | free                  | count 1, fence incremented
//   Acquire by same owner     | held by owner (n)     | count n+1, TTL raised to
//                             |                       | ttl if longer, same fence
//   Acquire by another owner  | held (or a SimpleLock | kAborted
//                             | string key)           |
//   Release by owner          | held by owner (n)     | OK; count n-1; at 0 the key
//                             |                       | is deleted and a release is
//                             |                       | published
//   Release / Extend          | not held by owner     | kFailedPrecondition
//   Extend by owner           | held by owner         | TTL raised to ttl if longer
//                             |                       | than what is left; never
//                             |                       | lowered (the watchdog)
//
// Two ReentrantLock objects (or processes) configured with the same
// `client_id` are the same owner for the same task id, so they nest (the
// nested `with` of the design document). Leave `client_id` empty to get a
// fresh random id per object (no sharing).
//
// Lease: `token` is the owner id (not per acquisition: the hold is the
// owner's); `fence` is the fence of the current holding (a re-acquire
// reports the same fence as the first); `deadline` = send time + ttl -
// drift. Because the lease names the owner, a Release with a stale lease of
// the same owner decrements the owner's current hold: release exactly once
// per successful Acquire.
//
// Unknown outcomes: an acquire whose reply is lost, times out, arrives after
// the lease deadline, or was cancelled after sending is undone in the
// background with a per-request marker key (P{R}:acquire:<request id>, PX
// ttl), so exactly that acquisition is undone if it ran and nothing else is
// ever decremented. If the undo cannot reach the server (it is retried while
// the marker could exist), the added count keeps the key alive at most ttl
// after that acquire unless the owner keeps extending it.
//
// Lifetime: `loop` and `transport` must outlive this object and its
// commands in flight; the object itself may be destroyed with operations in
// flight (they complete normally). Destroying it stops undo retries; what
// they would have undone expires by its TTL.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_REENTRANT_LOCK_H_
#define DLOCK_LOCK_REENTRANT_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/tokens.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// LeaseOptions (lease_options.h: key prefix, command timeout, drift, restart
// window, observer -- policy "reentrant"), plus the owner's identity and
// replica acknowledgement.
struct ReentrantLockOptions : LeaseOptions {
  // Identity of this client. Lock objects sharing it are one owner (per task
  // id). Empty: a fresh random id (NewToken()) for this object.
  std::string client_id;
  // Replica acknowledgement of acquisitions and extends (off by default;
  // set it with dlock::ReplicaAck(), replica_ack.h). Too few acknowledgements: an acquisition is undone, an
  // extend gives up this hold (one release), and the callback gets
  // kUnavailable (IsReplicaShortfall). Invalid: kInvalidArgument from the
  // calls.
  ReplicaAckOptions replica_ack;
};

class ReentrantLock : public Lock, private ReleaseNotifier {
 public:
  ReentrantLock(EventLoop* loop, Transport* transport,
                ReentrantLockOptions options = ReentrantLockOptions());
  ~ReentrantLock() override;

  ReentrantLock(const ReentrantLock&) = delete;
  ReentrantLock& operator=(const ReentrantLock&) = delete;

  // One attempt (see the table). Errors as SimpleLock::Acquire.
  // kInvalidArgument (from the call) for a bad resource or ttl.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;
  // Acquire's checks (resource, ttl under this lock's drift options).
  absl::Status CheckAcquireArgs(absl::string_view resource,
                                const AcquireOptions& options) const override;

  // Decrements the owner's count (deletes and publishes at zero). OK, or
  // kFailedPrecondition when `lease.token` holds nothing on the key. A
  // refused PUBLISH (ACL) is still OK, with a ReleaseEvent warning.
  absl::Status Release(const Lease& lease, StatusCallback callback) override;

  // If the owner holds the key, raises its TTL to `ttl` when that is longer
  // than what is left, and never lowers it: the key covers every hold of the
  // owner, so an inner hold's extend cannot cut an outer hold short. OK with
  // the lease's ttl = `ttl` and deadline = send time + ttl - drift, which is
  // what this extend guarantees; when the key already had more time left
  // (another hold of the owner keeps it longer) the key outlives that
  // deadline, never the other way round. kFailedPrecondition if the owner
  // holds nothing on the key.
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  const std::string& client_id() const;
  // The owner id for `task_id`: client_id() + ":" + task_id.
  std::string OwnerId(absl::string_view task_id) const;

  // Releases publish on KeyScheme::ChannelKey over this lock's transport.
  const ReleaseNotifier* release_notifier() const override { return this; }

  struct Core;

 private:
  std::string ReleaseChannel(absl::string_view resource) const override;
  Transport* ReleaseSubscriber() const override;

  std::shared_ptr<Core> core_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_REENTRANT_LOCK_H_
