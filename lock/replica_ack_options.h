// This header defines `ReplicaAckOptions`, the replica-acknowledgement
// option of SimpleLock, ReentrantLock and ReadWriteLock, without the code
// that runs the acknowledgement: a program that never asks for replica
// acknowledgement does not link that code (issue 23's footprint goal).
//
// To use it, include dlock/lock/replica_ack.h (Bazel: //lock:replica_ack;
// CMake: dlock::lock) and set the option with dlock::ReplicaAck():
//
//   options.replica_ack = dlock::ReplicaAck(/*min_replicas=*/2, absl::Milliseconds(500));
//
// Setting `min_replicas` by hand, without ReplicaAck(), is refused by every
// acquire and extend with kInvalidArgument (see ValidateReplicaAck): the
// option would otherwise have no code to run it. See replica_ack.h for what
// the acknowledgement does and does not guarantee.
//
// Internal pieces (WroteRule, ReplicaAckRunner, SendWithReplicaAck) are
// used by lock/ only.
// Call only on the loop's thread.
#ifndef DLOCK_LOCK_REPLICA_ACK_OPTIONS_H_
#define DLOCK_LOCK_REPLICA_ACK_OPTIONS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {

struct ReplicaAckOptions;

// Which replies say the script wrote (what replicas must acknowledge), as
// data: a lease command's reply parser names its rule (LeaseCommand), so no
// code is generated per parser for a path most programs never take.
struct WroteRule {
  enum class Kind { kNever, kIntegerAtLeast, kIntegerIs, kArray };
  Kind kind = Kind::kNever;
  int64_t value = 0;  // kIntegerAtLeast, kIntegerIs

  static WroteRule Never() { return {}; }
  static WroteRule IntegerAtLeast(int64_t v) { return {Kind::kIntegerAtLeast, v}; }
  static WroteRule IntegerIs(int64_t v) { return {Kind::kIntegerIs, v}; }
  static WroteRule Array() { return {Kind::kArray, 0}; }
  bool Wrote(const Reply& r) const;
};

// Runs `send(acked)`, where `acked` is a transport that sends WAIT right
// behind every script `send` runs on it and holds the script's reply until
// WAIT has answered (RunAcknowledged, replica_ack.h). The only runner is the
// one dlock::ReplicaAck() installs.
using ReplicaAckRunner = absl::Status (*)(Transport& transport, const ReplicaAckOptions& ack,
                                          WroteRule wrote,
                                          absl::FunctionRef<absl::Status(Transport&)> send);

struct ReplicaAckOptions {
  // How many replicas must acknowledge a grant or an extend; 0 (the
  // default) turns acknowledgement off (nothing extra is sent).
  int min_replicas = 0;
  // WAIT's own timeout: how long the master waits for the acknowledgements.
  // The reply's deadline is the command timeout plus this. Must be at least
  // 1 ms when min_replicas > 0 (WAIT 0 would wait forever).
  absl::Duration timeout = absl::Milliseconds(500);
  // The code that runs the acknowledgement; set by dlock::ReplicaAck()
  // (replica_ack.h). nullptr: not linked, and min_replicas > 0 is refused.
  ReplicaAckRunner runner = nullptr;
};

// kInvalidArgument for min_replicas < 0, a sub-millisecond timeout while
// min_replicas > 0, or min_replicas > 0 without a runner (the option was
// not set with dlock::ReplicaAck()).
absl::Status ValidateReplicaAck(const ReplicaAckOptions& ack);

// True for the status a write gets when fewer than min_replicas replicas
// acknowledged it (kUnavailable, message starting "replica acknowledgement:").
// The write itself ran on the master; the lock policies release what it
// granted before reporting this.
bool IsReplicaShortfall(const absl::Status& status);

// send(transport) when ack.min_replicas <= 0 (0 is the default: the lean
// path; a negative one is refused earlier, by the policy's option check);
// else ack.runner(transport, ack, wrote, send) when ValidateReplicaAck(ack)
// passes, or its kInvalidArgument (send never runs). LeaseCommand::Send.
absl::Status SendWithReplicaAck(Transport& transport, const ReplicaAckOptions& ack,
                                WroteRule wrote,
                                absl::FunctionRef<absl::Status(Transport&)> send);

}  // namespace dlock

#endif  // DLOCK_LOCK_REPLICA_ACK_OPTIONS_H_
