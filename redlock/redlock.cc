// RedLock's API: Create (option checks), the argument checks of each call,
// and the hand-off to the operations (operations.h) over the shared Core.
#include "dlock/redlock/redlock.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "dlock/lock/error_text.h"
#include "dlock/redlock/core.h"
#include "dlock/redlock/operations.h"

namespace dlock {

using redlock_internal::AcquireOp;
using redlock_internal::Core;
using redlock_internal::ExtendOp;
using redlock_internal::ReleaseOp;

namespace {

// Create's checks, with the quorum they settle on (a Status, built once per
// outcome: cheaper than a StatusOr<std::unique_ptr> per refusal).
absl::Status CheckCreate(EventLoop* loop, const std::vector<Transport*>& servers,
                         const RedLockOptions& options, int& quorum_out) {
  if (loop == nullptr) return absl::InvalidArgumentError("RedLock: loop is null");
  if (servers.empty()) {
    return absl::InvalidArgumentError("RedLock: needs at least one server");
  }
  // A handful of servers: a quadratic check (a hash set here cost 1.3 KB
  // of code for nothing).
  for (size_t i = 0; i < servers.size(); ++i) {
    Transport* t = servers[i];
    if (t == nullptr) return absl::InvalidArgumentError("RedLock: a server is null");
    if (std::find(servers.begin(), servers.begin() + i, t) != servers.begin() + i) {
      return absl::InvalidArgumentError(
          "RedLock: the same transport is listed twice (its votes would count twice)");
    }
  }
  const int n = static_cast<int>(servers.size());
  const int majority = n / 2 + 1;
  const int quorum = options.quorum == 0 ? majority : options.quorum;
  if (quorum < majority || quorum > n) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "RedLock: quorum % is impossible for % servers: it must lie in [%, %]",
                       {options.quorum, n, majority, n});
  }
  if (options.retry_count < 0) {
    return absl::InvalidArgumentError("RedLock: retry_count must be >= 0");
  }
  if (options.retry_delay < absl::ZeroDuration() ||
      options.retry_jitter < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "RedLock: retry_delay and retry_jitter must be >= 0");
  }
  if (!(options.drift_factor >= 0.0 && options.drift_factor < 0.5)) {
    return absl::InvalidArgumentError("RedLock: drift_factor must be in [0, 0.5)");
  }
  if (options.server_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RedLock: server_timeout must be >= 0");
  }
  if (options.release_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RedLock: release_timeout must be >= 0");
  }
  if (options.max_ttl < kMinTtl || options.max_ttl > kMaxTtl) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument, "RedLock: max_ttl must be in [%, %]",
                       {kMinTtl, kMaxTtl});
  }
  if (options.restart_window != absl::ZeroDuration() &&
      options.restart_window < options.max_ttl) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "RedLock: restart_window % must be 0 (= max_ttl) or >= max_ttl %: a lease "
                       "must not outlive the window",
                       {options.restart_window, options.max_ttl});
  }
  if (options.restart_window > kMaxTtl) {
    return absl::InvalidArgumentError("RedLock: restart_window must be <= 30 days");
  }
  if (!options.server_names.empty() &&
      options.server_names.size() != servers.size()) {
    return absl::InvalidArgumentError(
        "RedLock: server_names must be empty or name every server");
  }
  quorum_out = quorum;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedLock>> RedLock::Create(
    EventLoop* loop, std::vector<Transport*> servers, RedLockOptions options) {
  int quorum = 0;
  absl::Status s = CheckCreate(loop, servers, options, quorum);
  if (!s.ok()) return s;
  auto core = std::make_shared<Core>(loop, std::move(options), quorum, servers);
  return std::unique_ptr<RedLock>(new RedLock(std::move(core)));
}

RedLock::RedLock(std::shared_ptr<Core> core) : core_(std::move(core)) {}

RedLock::~RedLock() { core_->Shutdown(); }

namespace {

absl::Status ValidateLeaseTtl(const Core& core, absl::Duration ttl) {
  return dlock::ValidateLeaseTtl(ttl, core.options().max_ttl, core.options().drift_factor,
                                 kDefaultDriftConstant);
}

absl::Status ValidateLease(const Lease& lease) {
  return ValidateResourceToken(lease.resource, lease.token);
}

}  // namespace

absl::Status RedLock::CheckAcquireArgs(absl::string_view resource,
                                       const AcquireOptions& options) const {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = ValidateLeaseTtl(*core_, options.ttl);
  if (!s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<AcquireHandle> RedLock::Acquire(absl::string_view resource,
                                               const AcquireOptions& options,
                                               LeaseCallback callback) {
  absl::Status s = CheckAcquireArgs(resource, options);
  if (!s.ok()) return s;
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  if (!core_->run_ids().misconfigured().ok()) return core_->run_ids().misconfigured();
  auto op = std::make_shared<AcquireOp>(core_, resource, options, std::move(callback));
  core_->Register(op);
  op->Start();
  return AcquireHandle(std::weak_ptr<Cancellable>(op));
}

absl::Status RedLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateLease(lease);
  if (!s.ok()) return s;
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  auto op = std::make_shared<ReleaseOp>(core_, lease, std::move(callback));
  core_->Register(op);
  op->Start();
  return absl::OkStatus();
}

absl::Status RedLock::Extend(const Lease& lease, absl::Duration ttl,
                             LeaseCallback callback) {
  absl::Status s = ValidateLease(lease);
  if (!s.ok()) return s;
  s = ValidateLeaseTtl(*core_, ttl);
  if (!s.ok()) return s;
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  if (!core_->run_ids().misconfigured().ok()) return core_->run_ids().misconfigured();
  auto op = std::make_shared<ExtendOp>(core_, lease, ttl, std::move(callback));
  core_->Register(op);
  op->Start();
  return absl::OkStatus();
}

size_t RedLock::server_count() const { return core_->n(); }

std::string RedLock::ReleaseChannel(absl::string_view resource) const {
  return core_->options().keys.ChannelKey(resource);
}

Transport* RedLock::ReleaseSubscriber() const { return core_->server(0).transport; }

int RedLock::quorum() const { return core_->quorum(); }
absl::Duration RedLock::ServerTimeout(absl::Duration ttl) const {
  return core_->Timeout(ttl);
}
absl::Duration RedLock::DriftAllowance(absl::Duration ttl) const {
  return core_->Drift(ttl);
}

RedLock::ServerStatus RedLock::server_status(size_t index) const {
  return core_->run_ids().Status(index);
}

}  // namespace dlock
