#include "dlock/lock/lease_ops.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
  AcquireEvent event;
  event.policy = attempt.policy;
  event.resource = attempt.resource;
  event.status = result.status();
  event.latency = now - attempt.sent_at;
  event.attempts = 1;
  if (result.ok()) {
    event.fence = result->fence;
    event.ttl = result->ttl;
  }
  observer->OnAcquire(event);
  return result;
}

void BackgroundRetries::RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
  if (stopped_) return;
  auto id = std::make_shared<TimerId>(0);
  *id = loop_->RunAfter(delay, [this, id, fn = std::move(fn)]() mutable {
    timers_.erase(*id);
    std::move(fn)();
  });
  timers_.insert(*id);
}

void BackgroundRetries::Stop() {
  stopped_ = true;
  absl::flat_hash_set<TimerId> timers = std::move(timers_);
  timers_.clear();
  for (TimerId id : timers) loop_->Cancel(id);
}

}  // namespace dlock
