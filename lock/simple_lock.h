// This header defines `SimpleLock`: the single-server lock policy. Acquire
// is ONE attempt (an atomic script: SET NX PX plus INCR of the resource's
// fencing counter); Release is compare-and-delete plus a PUBLISH on the
// resource's release channel; Extend is compare-and-PEXPIRE to the new TTL.
// See lock_commands.h for the keys and scripts.
//
//   SimpleLock lock(&loop, &transport);
//   auto handle = lock.Acquire("orders/42", {.ttl = absl::Seconds(10)},
//       [](absl::StatusOr<Lease> lease) { ... });
//
// Outcomes of Acquire (the callback's argument):
//
//   outcome                                  | result
//   -----------------------------------------+------------------------------
//   key was free                             | Lease (token, fence, deadline)
//   key held by anyone (this lock included)  | kAborted
//   transient error reply (READONLY, OOM...) | kUnavailable       (*)
//   ACL refusal (NOPERM...)                  | kPermissionDenied  (*)
//   other error reply (see ErrorReplyStatus) | kInternal          (*)
//   no reply within command_timeout          | kDeadlineExceeded  (*)
//   connection down / lost                   | kUnavailable       (*)
//   reply arrived after the lease's deadline | kDeadlineExceeded  (*)
//   data set younger than restart_window     | kUnavailable "data set began
//     (option, off by default)               |   N ms ago ...: young, M ms left"
//   foreign data under the keys (another     | kInternal "foreign data under
//     type, or a string with no TTL)         |   the lock key ..."
//   fence counter at 2^53 - 1 or above       | kInternal "... is exhausted"
//
// Fences: a missing fence key starts at (when the server's data set began,
// ms) x 1000, so after a restart that lost the data fences still grow (see
// scripts.h); on a data set declared trusted (TrustDataSetCommand) they
// start at 1.
//
// (*) Unknown or useless outcome: the script may have run and set the key.
// SimpleLock then releases the token it sent, in the background (the token
// is fresh, so this can only delete our own key). The same happens when the
// Acquire was cancelled after the command was sent and the key was (or may
// have been) taken. If even that cleanup cannot reach the server (it is
// retried while the key could still exist), the key expires by itself at
// most `ttl` after the server set it: no lock outlives its ttl.
//
// The lease deadline is `send time + ttl - drift`, drift = ttl *
// drift_factor + drift_constant, on the loop's monotonic clock (send time,
// not reply time). Extend gives the new deadline counted from when the
// extend was sent. Because the deadline must be after the send time, a ttl
// must leave validity after the drift allowance: every ttl is checked by
// ValidateLeaseTtl (lease_rules.h: at least kMinLeaseTtl = 10 ms with the
// default drift options, at most kMaxTtl), else kInvalidArgument.
//
// Lifetime: `loop` and `transport` must outlive this object and every
// command it has in flight. The SimpleLock itself may be destroyed with
// operations in flight: they complete and call back normally. Destroying it
// stops the retries of background cleanups (so the transport may go next);
// keys those would have released expire by their TTL.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_SIMPLE_LOCK_H_
#define DLOCK_LOCK_SIMPLE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// LeaseOptions (lease_options.h: key prefix, command timeout, drift, restart
// window, observer -- policy "simple"), plus replica acknowledgement.
struct SimpleLockOptions : LeaseOptions {
  // Replica acknowledgement (off by default; set it with dlock::ReplicaAck(),
  // dlock/lock/replica_ack.h, target //lock:replica_ack): a grant or an
  // extend counts only once `WAIT min_replicas timeout` confirmed it. Too
  // few acknowledgements: the key is released (in the background) and the
  // callback gets kUnavailable (IsReplicaShortfall; RetryLock retries it).
  // An invalid setting makes Acquire and Extend return kInvalidArgument.
  ReplicaAckOptions replica_ack;
  // Fencing tokens (on by default): every grant carries `Lease::fence`
  // from the server's fence mark (docs/fences.md). Off: the acquire is SET
  // NX PX alone (plus the restart rule, when its window is on) and every
  // lease's fence is 0 -- the work a Redlock without fencing does
  // (node-redlock, redsync), for a resource that cannot check a fence
  // anyway. A fenced store refuses fence 0 as stale once it saw a fence.
  // With the window off too (and no replica_ack) the acquire is one plain
  // `SET NX PX GET`, no script; a string with no TTL under the lock key then
  // reads as held (kAborted) instead of foreign data.
  bool fencing = true;
};

class SimpleLock : public Lock, private ReleaseNotifier {
 public:
  SimpleLock(EventLoop* loop, Transport* transport,
             SimpleLockOptions options = SimpleLockOptions());
  ~SimpleLock() override;

  SimpleLock(const SimpleLock&) = delete;
  SimpleLock& operator=(const SimpleLock&) = delete;

  // One attempt; see the table above. `options.wait` and `options.task_id`
  // are ignored. Returns kInvalidArgument for a bad resource
  // (ValidateResource) or a ttl ValidateLeaseTtl refuses under this lock's
  // drift options; the callback then never runs. Cancel() on the handle: the
  // callback never runs, and a key the command took is released.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;
  // Acquire's checks (resource, ttl under this lock's drift options).
  absl::Status CheckAcquireArgs(absl::string_view resource,
                                const AcquireOptions& options) const override;

  // Compare-and-delete. OK: the key was ours and is gone, and a release
  // notification was published (if the server refused the PUBLISH -- an ACL
  // user without channel permission -- still OK, and the observer's
  // ReleaseEvent carries a warning that waiters will not be woken). kFailedPrecondition: the key is gone or
  // holds another token (nothing touched). kUnavailable /
  // kDeadlineExceeded: unknown; the release is sent again in the background
  // (as a failed acquire's cleanup: up to 3 times, 100 ms apart, while the
  // key may exist), and the key expires by its TTL at the latest.
  // kInvalidArgument (from the call) for a lease with a bad resource or an
  // empty token.
  absl::Status Release(const Lease& lease, StatusCallback callback) override;

  // Compare-and-PEXPIRE to `ttl`. OK: the callback gets the lease with the
  // new ttl and deadline (from the send time; it may already have passed if
  // the reply was very late). kFailedPrecondition: the lease no longer owns
  // the key (expired or taken). kInvalidArgument (from the call) as for
  // Acquire.
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  const KeyScheme& keys() const;

  // Shared with operations in flight (so the lock may die before them).
  // Releases publish on KeyScheme::ChannelKey over this lock's transport.
  const ReleaseNotifier* release_notifier() const override { return this; }

  struct Core;

 private:
  std::string ReleaseChannel(absl::string_view resource) const override;
  Transport* ReleaseSubscriber() const override;
  std::string HandOffLockKey(absl::string_view resource) const override;
  Transport* HandOffTransport() const override;
  absl::Status ReleaseForHandOff(const Lease& lease, HandOffRelease how,
                                 StatusCallback callback) const override;

  std::shared_ptr<Core> core_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_SIMPLE_LOCK_H_
