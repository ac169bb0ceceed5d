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
// The option itself (ReplicaAckOptions, ValidateReplicaAck,
// IsReplicaShortfall) is in replica_ack_options.h, which every policy
// includes; this header and its target (//lock:replica_ack) are what a
// program that uses the acknowledgement links. Call only on the loop's
// thread.
#ifndef DLOCK_LOCK_REPLICA_ACK_H_
#define DLOCK_LOCK_REPLICA_ACK_H_

#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {

// Replica acknowledgement, ready to assign to a policy's `replica_ack`
// option: `min_replicas` replicas must acknowledge every grant and extend,
// WAIT waiting at most `timeout` for them. This function is what links the
// acknowledgement code into a program (replica_ack_options.h): an option
// with min_replicas > 0 that was not made here is refused with
// kInvalidArgument. ReplicaAck(0) is off, as the default option is.
//
//   SimpleLockOptions options;
//   options.replica_ack = dlock::ReplicaAck(2, absl::Milliseconds(500));
ReplicaAckOptions ReplicaAck(int min_replicas,
                             absl::Duration timeout = absl::Milliseconds(500));

// Runs `script` on `transport` and, when ack.min_replicas > 0, `WAIT
// min_replicas timeout` right behind it. The callback gets the script's
// reply or failure unchanged, except when `wrote` says the script changed
// the key and the acknowledgement fell short: then kUnavailable
// ("replica acknowledgement: only K of N replicas ..."; IsReplicaShortfall),
// also when the WAIT failed or its connection was not the script's (the
// acknowledgement is unknown). With min_replicas == 0 this is Script::Run.
// Returns the transport's rejection of the script, or kInvalidArgument when
// min_replicas > 0 on a Redis Cluster transport (Transport::cluster(): WAIT
// cannot be routed to the script's master); the callback then never runs.
// A late-safe script that Script sends again after a SCRIPT FLUSH gets a
// WAIT of its own right behind it; the first WAIT's answer is ignored.
// (The policies reach the same code through ReplicaAckOptions::runner.)
absl::Status RunAcknowledged(const Script& script, Transport& transport,
                             std::vector<std::string> keys,
                             std::vector<std::string> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteRule wrote,
                             ReplyCallback callback);

}  // namespace dlock

#endif  // DLOCK_LOCK_REPLICA_ACK_H_
