#include "dlock/blocking/client_options.h"

#include "absl/strings/str_cat.h"
#include "dlock/lock/replica_ack.h"

namespace dlock {
namespace blocking_internal {

absl::Status CheckServerCount(const BlockingClientOptions& options, size_t servers) {
  if (options.reentrant && servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: reentrant locks need a single server (RedLock is not "
        "reentrant)");
  }
  if (!options.fair) return absl::OkStatus();
  if (servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: fair locks need a single server (RedLock has no queue)");
  }
  if (options.reentrant) {
    return absl::InvalidArgumentError("BlockingClient: a lock cannot be both fair and reentrant");
  }
  return absl::OkStatus();
}

absl::Status CheckClientOptions(const BlockingClientOptions& options, size_t servers) {
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: connect_timeout must be positive");
  }
  if (options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: command_timeout must be positive");
  }
  absl::Status count = CheckServerCount(options, servers);
  if (!count.ok()) return count;
  if (options.min_replicas > 0 && servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: min_replicas needs a "
        "single server (RedLock's servers are "
        "independent, not replicas)");
  }
  if (options.min_replicas > 0 && options.fair) {
    return absl::InvalidArgumentError(
        "BlockingClient: min_replicas cannot be combined with fair (the fair queue does "
        "not wait for replicas)");
  }
  absl::Status s =
      ValidateReplicaAck(ReplicaAck(options.min_replicas, options.replica_ack_timeout));
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("BlockingClient: ", s.message()));
  return absl::OkStatus();
}

BlockingLockOptions FacadeOptions(bool auto_renew, LockObserver* observer) {
  BlockingLockOptions o;
  o.auto_renew = auto_renew;
  o.renewal.watchdog.observer = observer;
  return o;
}

}  // namespace blocking_internal
}  // namespace dlock
