#include "dlock/lock/lease_reports.h"

#include <string>

#include "dlock/lock/error_text.h"

namespace dlock {

void ReportAcquire(LockObserver* observer, absl::string_view policy,
                   absl::string_view resource, const absl::StatusOr<Lease>& result,
                   absl::Duration latency, absl::Duration waited, int attempts) {
  AcquireEvent event;
  event.policy = policy;
  event.resource = resource;
  event.status = result.status();
  event.latency = latency;
  event.waited = waited;
  event.attempts = attempts;
  if (result.ok()) {
    event.fence = result->fence;
    event.ttl = result->ttl;
  }
  observer->OnAcquire(event);
}

void ReportLateGrant(LockObserver* observer, absl::string_view policy,
                     absl::string_view resource, absl::string_view reason) {
  LateGrantEvent event;
  event.policy = policy;
  event.resource = resource;
  event.operation = "acquire";
  event.reason = reason;
  observer->OnLateGrant(event);
}

void ReportAcquireWait(LockObserver* observer, absl::string_view policy,
                       absl::string_view resource, int attempt, const absl::Status& last_error,
                       absl::Duration next_attempt_in, absl::Duration wait_left) {
  observer->OnAcquireWait(
      AcquireWaitEvent{policy, resource, attempt, last_error, next_attempt_in, wait_left});
}

std::string WaitDeadlineMessage(absl::string_view what, absl::Duration wait, int attempts) {
  return ErrorText("% not acquired within the wait of % (%%",
                   {what, wait, attempts, attempts == 1 ? " attempt" : " attempts"});
}

}  // namespace dlock
