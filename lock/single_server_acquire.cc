#include "dlock/lock/single_server_acquire.h"

#include <memory>
#include <string>
#include <utility>

#include "dlock/lock/error_text.h"
#include "dlock/lock/lease_reports.h"
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
      result = ErrorStatus(absl::StatusCode::kDeadlineExceeded,
                           "acquire reply came % after sending, past the lease deadline",
                           {now - attempt.sent_at});
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

}  // namespace dlock
