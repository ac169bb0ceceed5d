#include "dlock/lock/lease_core.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace dlock {

namespace {

// `first` when it is an error, else `second` (the checks in order).
absl::Status FirstError(const absl::Status& first, absl::Status second) {
  return first.ok() ? second : first;
}

}  // namespace

LeaseCore::LeaseCore(EventLoop* loop, const LeaseOptions& options,
                     const ReplicaAckOptions& replica_ack, absl::Status extend_extra,
                     absl::Status acquire_extra)
    : loop(loop),
      observer(ObserverOrNoop(options.observer)),
      command_timeout(options.command_timeout),
      drift_factor(options.drift_factor),
      drift_constant(options.drift_constant),
      restart_window(options.restart_window),
      replica_ack(replica_ack),
      release_check(options.command_timeout > absl::ZeroDuration()
                        ? absl::OkStatus()
                        : absl::InvalidArgumentError("command_timeout must be positive")),
      extend_check(FirstError(
          release_check,
          FirstError(ValidateReplicaAck(replica_ack), std::move(extend_extra)))),
      acquire_check(FirstError(
          extend_check,
          FirstError(options.restart_window < absl::ZeroDuration()
                         ? absl::InvalidArgumentError("restart_window must be >= 0")
                         : absl::OkStatus(),
                     std::move(acquire_extra)))) {}

absl::Status LeaseCore::CheckAcquire(absl::string_view resource, absl::Duration ttl) const {
  if (!acquire_check.ok()) return acquire_check;
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  return CheckTtl(ttl);
}

absl::Status LeaseCore::CheckExtend(const Lease& lease, absl::Duration ttl) const {
  if (!extend_check.ok()) return extend_check;
  absl::Status s = ValidateResourceToken(lease.resource, lease.token);
  if (!s.ok()) return s;
  return CheckTtl(ttl);
}

absl::Status LeaseCore::CheckRelease(const Lease& lease) const {
  if (!release_check.ok()) return release_check;
  return ValidateResourceToken(lease.resource, lease.token);
}

void BackgroundRetries::RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
  if (stopped_) return;
  auto id = std::make_shared<TimerId>(0);
  *id = loop_->RunAfter(delay, [this, id, fn = std::move(fn)]() mutable {
    timers_.erase(std::remove(timers_.begin(), timers_.end(), *id), timers_.end());
    std::move(fn)();
  });
  timers_.push_back(*id);
}

void BackgroundRetries::Stop() {
  stopped_ = true;
  std::vector<TimerId> timers = std::move(timers_);
  timers_.clear();
  for (TimerId id : timers) loop_->Cancel(id);
}

}  // namespace dlock
