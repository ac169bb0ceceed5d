#include "dlock/lock/replica_ack_options.h"

#include <utility>

#include "absl/strings/match.h"

namespace dlock {

absl::Status ValidateReplicaAck(const ReplicaAckOptions& ack) {
  if (ack.min_replicas < 0) {
    return absl::InvalidArgumentError("min_replicas must be >= 0");
  }
  if (ack.min_replicas > 0 && ack.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        "the replica acknowledgement timeout must be at least 1 ms");
  }
  if (ack.min_replicas > 0 && ack.runner == nullptr) {
    return absl::InvalidArgumentError(
        "replica acknowledgement (min_replicas > 0) must be set with dlock::ReplicaAck() "
        "from dlock/lock/replica_ack.h (Bazel //lock:replica_ack), which links the code "
        "that runs it");
  }
  return absl::OkStatus();
}

bool IsReplicaShortfall(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         absl::StartsWith(status.message(), "replica acknowledgement: ");
}

bool WroteRule::Wrote(const Reply& r) const {
  switch (kind) {
    case Kind::kNever:
      return false;
    case Kind::kIntegerAtLeast:
      return r.is_integer() && r.integer >= value;
    case Kind::kIntegerIs:
      return r.is_integer() && r.integer == value;
    case Kind::kArray:
      return r.is_array();
  }
  return false;
}

absl::Status SendWithReplicaAck(Transport& transport, const ReplicaAckOptions& ack,
                                WroteRule wrote,
                                absl::FunctionRef<absl::Status(Transport&)> send) {
  if (ack.min_replicas <= 0) return send(transport);
  absl::Status s = ValidateReplicaAck(ack);
  if (!s.ok()) return s;
  return ack.runner(transport, ack, wrote, send);
}

}  // namespace dlock
