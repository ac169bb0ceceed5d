// This header defines `MultiLock`: all-or-nothing acquisition of several
// resources through any `Lock` (SimpleLock, RetryLock, ReentrantLock,
// RedLock, a ReadWriteLock view), one Lease per resource.
//
//   RetryLock retry(&loop, &simple);
//   MultiLock multi(&loop, &retry);
//   multi.Acquire({"accounts/7", "accounts/3"}, {.ttl = s(10), .wait = s(5)},
//                 [](absl::StatusOr<std::vector<Lease>> leases) { ... });
//
// Order. The resources are taken one after another in ONE global order --
// sorted bytewise (OrderResources) -- whatever order the caller named them
// in, so two multi-locks over overlapping sets never wait for each other in
// a cycle (no deadlock). The leases come back in that sorted order.
//
// All or nothing. When any resource cannot be taken (busy, wait over,
// server error, unknown outcome) every lease already taken is released
// BEFORE the callback reports the failure (the callback runs once those
// releases were answered; one whose outcome is unknown leaves its key to
// expire by its TTL). An unknown outcome of the failing acquire itself is
// the wrapped lock's to undo (every dlock policy releases the token it
// sent). Cancel() on the handle cancels the acquire in flight (the wrapped
// lock gives back what it took) and releases the leases already taken, in
// the background. A lease whose local deadline passed while later
// resources were being taken (a long wait) fails the whole acquire with
// kDeadlineExceeded, after releasing everything.
//
// Waiting: `options.wait` bounds the WHOLE acquisition; each resource's
// acquire gets what is left of it (a RetryLock waits that long; zero: one
// attempt each). Result: the first failure's status (kAborted when busy,
// kDeadlineExceeded when the wait ran out, ...).
//
// Together: Release() releases every lease (in parallel) and reports OK
// only if every release did; Extend() extends every lease to `ttl` and
// reports the new leases only if every extend succeeded (else the first
// failure, in resource order; the leases that were extended keep their new
// TTL). To renew a multi-lock, watch each lease with one Watchdog over the
// same Lock and treat any lease's on_lost as the loss of all (the blocking
// facade's MultiLockGuard does: it is valid only while all its guards are).
//
// Bad input, from the call (callback never runs): kInvalidArgument for an
// empty list, a duplicate resource, or whatever the wrapped lock rejects
// (checked for every resource before anything is sent: ValidateResource,
// and the ttl through the first acquire).
//
// Lifetime: `loop` and `lock` must outlive this object and its operations.
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_MULTI_LOCK_H_
#define DLOCK_LOCK_MULTI_LOCK_H_

#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

using MultiLeaseCallback =
    absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>) &&>;

// The global order: `resources` sorted bytewise. kInvalidArgument for an
// empty list, a duplicate, or a resource ValidateResource refuses.
absl::StatusOr<std::vector<std::string>> OrderResources(
    std::vector<std::string> resources);

class MultiLock {
 public:
  MultiLock(EventLoop* loop, Lock* lock);

  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;

  // See the header comment. On success the callback gets one Lease per
  // resource, in OrderResources order.
  absl::StatusOr<AcquireHandle> Acquire(std::vector<std::string> resources,
                                        const AcquireOptions& options,
                                        MultiLeaseCallback callback);

  // Releases every lease; OK iff all releases were OK, else the first
  // failure (in the leases' order). kInvalidArgument (from the call) for an
  // empty list or what the wrapped lock rejects (then nothing was sent).
  absl::Status Release(const std::vector<Lease>& leases, StatusCallback callback);

  // Extends every lease to `ttl`; the new leases iff all succeeded.
  absl::Status Extend(const std::vector<Lease>& leases, absl::Duration ttl,
                      MultiLeaseCallback callback);

 private:
  EventLoop* const loop_;
  Lock* const lock_;
};

// `ResourceSetLock`: a fixed set of resources as ONE `Lock`, so everything
// built for a single lock -- RetryLock's callers, the Watchdog, the blocking
// facade, the `dlock run` command -- takes a multi-lock unchanged:
//
//   ResourceSetLock both(&loop, &retry, {"accounts/7", "accounts/3"});
//   both.Acquire("transfer", {.ttl = s(10), .wait = s(5)}, cb);   // one Lease
//   Watchdog watchdog(&loop, &both);   // renews every resource together
//
// Acquire(label, ...) takes every resource of the set through MultiLock
// (all-or-nothing, sorted order, options.wait for the whole set); `label` is
// only the name the combined Lease carries (any valid resource string). The
// combined Lease:
//   resource  `label`
//   token     every sub-lease's resource, token and fence, encoded
//             (length-prefixed; DecodeResourceSetToken reads it back)
//   fence     the first resource's (in sorted order) fence
//   ttl       the ttl asked for
//   deadline  the EARLIEST sub-lease deadline: the set is only as valid as
//             its least valid member
// Extend extends every sub-lease (MultiLock::Extend): OK only if all
// succeeded, the new deadline again the earliest. Release releases all:
// OK only if all did (else the first failure; the others are released
// anyway). A token that does not decode: kInvalidArgument from the call.
// No release_notifier(): wrap the INNER lock in a RetryLock to wait with
// notifications (MultiLock passes the wait to it), not this one.
class ResourceSetLock : public Lock {
 public:
  // kInvalidArgument from Acquire when `resources` is empty or has a
  // duplicate (OrderResources).
  ResourceSetLock(EventLoop* loop, Lock* inner, std::vector<std::string> resources);

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view label,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;
  absl::Status Release(const Lease& lease, StatusCallback callback) override;
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  // The sub-leases a combined lease stands for (sorted order).
  static absl::StatusOr<std::vector<Lease>> SubLeases(const Lease& lease);

 private:
  MultiLock multi_;
  const std::vector<std::string> resources_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_MULTI_LOCK_H_
