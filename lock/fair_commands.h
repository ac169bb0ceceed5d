// This header defines `FairCommands`: the fair lock's two scripts
// (fair_scripts.h) on ONE Redis server, with their keys and replies.
// Internal to lock/ (used by FairLock). Not thread-safe: call only on the
// loop's thread. The transport must outlive this object and every command
// it sent; the callbacks do not refer to this object.
#ifndef DLOCK_LOCK_FAIR_COMMANDS_H_
#define DLOCK_LOCK_FAIR_COMMANDS_H_

#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/transport.h"

namespace dlock {

// What FairAcquire answered when it did not refuse.
struct FairAcquireReply {
  // > 0: granted, the new fencing token. 0: not granted.
  int64_t fence = 0;
  // Not granted: the caller's place in the queue (1 = head; 0 = not
  // queued, a try without a waiter id) and how many live waiters there are.
  int64_t position = 0;
  int64_t waiters = 0;
};

class FairCommands {
 public:
  FairCommands(Transport* transport, KeyScheme keys);

  const KeyScheme& keys() const { return keys_; }
  Transport* transport() const { return transport_; }

  // P{R}:queue.
  std::string QueueKey(absl::string_view resource) const;
  // The channel waiters of the lock instance `instance` are notified on:
  // P"waiter:" + instance (one per FairLock, for all resources).
  std::string WaiterChannel(absl::string_view instance) const;

  // FairAcquire. `waiter` empty: a try that never queues. Callback: the
  // reply (granted or queued); refusals as LockCommands::TryAcquire
  // (young data set, foreign data, exhausted fence); transport failures
  // and error replies as there. kInvalidArgument from the call for a bad
  // resource, empty token, bad ttl, queue_ttl < 1 ms or timeout <= 0.
  absl::Status Acquire(absl::string_view resource, absl::string_view token,
                       absl::string_view waiter, absl::Duration ttl,
                       absl::Duration restart_window, absl::Duration queue_ttl,
                       absl::Duration timeout,
                       absl::AnyInvocable<void(absl::StatusOr<FairAcquireReply>) &&> cb);

  // FairRelease: deletes the lock if it holds `token`, removes `waiter`'s
  // entry (if not empty), notifies the head if the lock is then free.
  // OK (deleted; ReleaseNotice says whether the notification went out) or
  // kFailedPrecondition (the lock was not `token`'s; the entry is removed
  // all the same).
  absl::Status Release(absl::string_view resource, absl::string_view token,
                       absl::string_view waiter, absl::Duration timeout,
                       absl::AnyInvocable<void(absl::StatusOr<ReleaseNotice>) &&> cb);

 private:
  Transport* transport_;
  KeyScheme keys_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_FAIR_COMMANDS_H_
