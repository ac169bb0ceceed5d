#include "dlock/lock/lease_ops.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/reply_status.h"

namespace dlock {

absl::StatusOr<Lease> FinishAcquire(const AcquireAttempt& attempt,
                                    absl::StatusOr<int64_t> fence, absl::Time now,
                                    LockObserver* observer,
                                    absl::FunctionRef<void()> undo) {
  absl::StatusOr<Lease> result;
  if (fence.ok()) {
    if (now >= attempt.deadline) {
      undo();
      ReportLateGrant(observer, attempt.policy, attempt.resource, kLateGrantExpired);
      result = absl::DeadlineExceededError(absl::StrCat(
          "acquire reply came ", absl::FormatDuration(now - attempt.sent_at),
          " after sending, past the lease deadline"));
    } else {
      Lease lease;
      lease.resource = std::string(attempt.resource);
      lease.token = std::string(attempt.token);
      lease.fence = *fence;
      lease.ttl = attempt.ttl;
      lease.deadline = attempt.deadline;
      result = std::move(lease);
    }
  } else {
    // A refusal (held, young data set) set nothing: nothing to undo.
    if (!absl::IsAborted(fence.status()) && !IsYoungDataSet(fence.status())) undo();
    result = fence.status();
  }
  ReportAcquire(observer, attempt.policy, attempt.resource, result, now - attempt.sent_at,
                absl::ZeroDuration(), 1);
  return result;
}

namespace {

absl::Status FirstError(std::initializer_list<absl::Status> statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
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
      extend_check(FirstError({release_check, ValidateReplicaAck(replica_ack),
                               std::move(extend_extra)})),
      acquire_check(FirstError(
          {extend_check,
           options.restart_window < absl::ZeroDuration()
               ? absl::InvalidArgumentError("restart_window must be >= 0")
               : absl::OkStatus(),
           std::move(acquire_extra)})) {}

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

namespace {

constexpr int kCleanupAttempts = 3;
constexpr absl::Duration kCleanupRetryDelay = absl::Milliseconds(100);

void CleanupAttempt(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                    std::shared_ptr<CleanupSend> send, int attempts_left) {
  // Kept here too: a transport that rejects the send drops the callback,
  // and with it the last other reference, before `s` returns.
  std::shared_ptr<CleanupSend> keep = send;
  CleanupSend& s = *keep;
  absl::Status sent = s([core = std::move(core), key_expiry, send = std::move(send),
                         attempts_left](bool unknown) mutable {
    if (!unknown || attempts_left <= 1) return;
    if (core->loop->Now() + kCleanupRetryDelay >= key_expiry) return;
    LeaseCore* c = core.get();
    c->retries.RunLater(kCleanupRetryDelay, [core = std::move(core), key_expiry,
                                              send = std::move(send),
                                              attempts_left]() mutable {
      CleanupAttempt(std::move(core), key_expiry, std::move(send), attempts_left - 1);
    });
  });
  // A rejected send (transport closed): nothing more we can do; the key
  // expires by its TTL.
  (void)sent;
}

}  // namespace

bool IsUnknownOutcome(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

void RunCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                CleanupSend send) {
  CleanupAttempt(std::move(core), key_expiry,
                 std::make_shared<CleanupSend>(std::move(send)), kCleanupAttempts);
}

SingleServerAcquire::SingleServerAcquire(std::shared_ptr<LeaseCore> core,
                                         absl::string_view policy, std::string resource,
                                         std::string token, absl::Duration ttl,
                                         LeaseCallback callback)
    : core_(std::move(core)),
      policy_(policy),
      resource_(std::move(resource)),
      token_(std::move(token)),
      ttl_(ttl),
      sent_at_(core_->loop->Now()),
      callback_(std::move(callback)) {}

bool SingleServerAcquire::Cancel() {
  if (state_ != State::kPending) return false;
  state_ = State::kCancelled;
  LeaseCallback dropped = std::move(callback_);
  (void)dropped;  // destroyed here, before Cancel returns
  return true;
}

void SingleServerAcquire::OnReply(absl::StatusOr<int64_t> fence) {
  const absl::Time now = core_->loop->Now();
  const absl::Time deadline = sent_at_ + ttl_ - core_->Drift(ttl_);
  if (state_ == State::kCancelled) {
    // Nobody wants the lock any more; give back whatever we may hold.
    if (!absl::IsAborted(fence.status())) Undo();
    if (fence.ok()) ReportLateGrant(core_->observer, policy_, resource_, kLateGrantCancelled);
    return;
  }
  state_ = State::kDone;
  absl::StatusOr<Lease> result =
      FinishAcquire({policy_, resource_, token_, ttl_, sent_at_, deadline},
                    std::move(fence), now, core_->observer, [this] { Undo(); });
  LeaseCallback cb = std::move(callback_);
  std::move(cb)(std::move(result));
}

void FinishRelease(const LeaseCore& core, absl::string_view policy,
                   absl::string_view resource, absl::Time sent_at,
                   absl::Status status, absl::string_view warning,
                   StatusCallback callback) {
  ReleaseEvent event;
  event.policy = policy;
  event.resource = resource;
  event.status = status;
  event.latency = core.loop->Now() - sent_at;
  event.warning = warning;
  core.observer->OnRelease(event);
  std::move(callback)(std::move(status));
}

void FinishExtend(const LeaseCore& core, absl::string_view policy, Lease lease,
                  absl::Duration ttl, absl::Time sent_at, absl::Status status,
                  LeaseCallback callback) {
  ExtendEvent event;
  event.policy = policy;
  event.resource = lease.resource;
  event.status = status;
  event.latency = core.loop->Now() - sent_at;
  event.ttl = ttl;
  core.observer->OnExtend(event);
  if (!status.ok()) {
    std::move(callback)(std::move(status));
    return;
  }
  lease.ttl = ttl;
  lease.deadline = sent_at + ttl - core.Drift(ttl);
  std::move(callback)(std::move(lease));
}

void FinishNoticedRelease(const LeaseCore& core, absl::string_view policy,
                          absl::string_view resource, absl::Time sent_at,
                          const absl::StatusOr<ReleaseNotice>& notice,
                          StatusCallback callback) {
  std::string warning;
  if (notice.ok() && !notice->published) {
    warning = UnpublishedReleaseWarning(notice->publish_error);
  }
  FinishRelease(core, policy, resource, sent_at, notice.status(), warning,
                std::move(callback));
}

absl::Status GiveUpOnShortfall(absl::Status status, absl::string_view what,
                               absl::FunctionRef<void()> give_up) {
  if (!IsReplicaShortfall(status)) return status;
  give_up();
  return absl::UnavailableError(absl::StrCat(status.message(), "; ", what, " was released"));
}

}  // namespace dlock
