// Internal to //blocking (namespace blocking_internal): what a
// `BlockingClientOptions` means, in one place -- the rules it must satisfy
// (for a given number of servers) and the options of the policies and
// facades a BlockingClient builds from it. Not part of the API.
#ifndef DLOCK_BLOCKING_CLIENT_OPTIONS_H_
#define DLOCK_BLOCKING_CLIENT_OPTIONS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack.h"

namespace dlock {
namespace blocking_internal {

// The rules that depend on the number of servers: `reentrant` and `fair`
// need a single one, and a lock cannot be both. kInvalidArgument naming the
// rule, else OK.
absl::Status CheckServerCount(const BlockingClientOptions& options, size_t servers);

// Every rule ConnectBlockingClient/Create check before anything starts: positive
// timeouts, CheckServerCount, `min_replicas` only with a single server, a
// valid replica acknowledgement. kInvalidArgument naming the rule, else OK.
absl::Status CheckClientOptions(const BlockingClientOptions& options, size_t servers);

// The options a single-server policy `O` (SimpleLockOptions,
// ReentrantLockOptions, FairLockOptions, ReadWriteLockOptions,
// SemaphoreOptions) takes from the client's: key prefix, command timeout
// and observer; the rest keeps O's defaults.
template <typename O>
O PolicyOptions(const BlockingClientOptions& options) {
  O o;
  o.key_prefix = options.key_prefix;
  o.command_timeout = options.command_timeout;
  o.observer = options.observer;
  return o;
}

// PolicyOptions plus the client's replica acknowledgement, for the policies
// that support one.
template <typename O>
O AckedPolicyOptions(const BlockingClientOptions& options) {
  O o = PolicyOptions<O>(options);
  o.replica_ack = ReplicaAck(options.min_replicas, options.replica_ack_timeout);
  return o;
}

// The options of a facade over one of the client's policies: renewing with
// `auto_renew`, the watchdog reporting to `observer`. No on_lost hook (the
// client has none), so each facade gets a fresh one.
BlockingLockOptions FacadeOptions(bool auto_renew, LockObserver* observer);

}  // namespace blocking_internal
}  // namespace dlock

#endif  // DLOCK_BLOCKING_CLIENT_OPTIONS_H_
