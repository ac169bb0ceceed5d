// This header defines replica acknowledgement: the option that makes a
// grant or an extend count only after `WAIT N timeout` has confirmed that N
// replicas of the master hold it, and the one helper every single-server
// lease operation (SimpleLock, ReentrantLock, and through them RetryLock and
// the watchdog's renewals) runs its script through.
//
// Why: Redis replicates asynchronously. A lock the master granted and then
// lost in a failover before any replica received it is granted again by the
// promoted replica: two holders. `WAIT` closes most of that window (a
// replica that acknowledged has the key; Sentinel promotes the most
// up-to-date replica), it does not make Redis strongly consistent (the
// promoted replica may be one that did not acknowledge when N is smaller
// than the replica count; see docs/deployments.md).
//
// WAIT cannot run inside a Lua script, so it is sent right behind the
// script, in the same loop turn, on the same transport: the two are
// pipelined on one connection and WAIT counts the replicas that have the
// script's write. A script cut off by a SCRIPT FLUSH fails (it did not run)
// unless it is late-safe (Script::LateRun::kSafe, the plain release): that
// one is sent again after the first WAIT, so a second WAIT follows it.
//
// Internal to //:__subpackages__. Call only on the loop's thread.
#ifndef DLOCK_LOCK_REPLICA_ACK_H_
#define DLOCK_LOCK_REPLICA_ACK_H_

#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {

struct ReplicaAckOptions {
  // How many replicas must acknowledge a grant or an extend; 0 (the
  // default) turns acknowledgement off (nothing extra is sent).
  int min_replicas = 0;
  // WAIT's own timeout: how long the master waits for the acknowledgements.
  // The reply's deadline is the command timeout plus this. Must be positive
  // when min_replicas > 0 (WAIT 0 would wait forever).
  absl::Duration timeout = absl::Milliseconds(500);
};

// kInvalidArgument for min_replicas < 0, or a non-positive or sub-millisecond
// timeout while min_replicas > 0.
absl::Status ValidateReplicaAck(const ReplicaAckOptions& ack);

// True for the status a write gets when fewer than min_replicas replicas
// acknowledged it (kUnavailable, message starting "replica acknowledgement:").
// The write itself ran on the master; the lock policies release what it
// granted before reporting this.
bool IsReplicaShortfall(const absl::Status& status);

// Which replies say the script wrote (what replicas must acknowledge).
using WroteFn = absl::AnyInvocable<bool(const Reply&) const>;

// Runs `script` on `transport` and, when ack.min_replicas > 0, `WAIT
// min_replicas timeout` right behind it. The callback gets the script's
// reply or failure unchanged, except when `wrote(reply)` says the script
// changed the key and the acknowledgement fell short: then kUnavailable
// ("replica acknowledgement: only K of N replicas ..."; IsReplicaShortfall),
// also when the WAIT failed or its connection was not the script's (the
// acknowledgement is unknown). With min_replicas == 0 this is Script::Run.
// Returns the transport's rejection of the script, or kInvalidArgument when
// min_replicas > 0 on a Redis Cluster transport (Transport::cluster(): WAIT
// cannot be routed to the script's master); the callback then never runs.
absl::Status RunAcknowledged(const Script& script, Transport& transport,
                             std::vector<std::string> keys,
                             std::vector<std::string> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteFn wrote,
                             ReplyCallback callback);

}  // namespace dlock

#endif  // DLOCK_LOCK_REPLICA_ACK_H_
