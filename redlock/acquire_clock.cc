#include "dlock/redlock/acquire_clock.h"

#include "absl/strings/str_cat.h"
#include "dlock/redlock/core.h"

namespace dlock {
namespace redlock_internal {

absl::Status AcquireClock::CheckValidity(absl::Time now) const {
  if (now < ValidityEnd()) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("quorum reached after ", absl::FormatDuration(now - t0_),
                   ": no validity left of ttl ", absl::FormatDuration(ttl_)));
}

bool AcquireClock::MayRetry(bool final, absl::Time now, absl::Duration delay,
                            int retry_count) const {
  if (final) return false;
  if (wait_ > absl::ZeroDuration()) return now + delay <= call_time_ + wait_;
  return retries_ < retry_count;
}

AcquireWaitEvent AcquireClock::Pause(absl::string_view resource, int attempt,
                                     const absl::Status& last_error, absl::Duration delay,
                                     absl::Time now) {
  ++retries_;
  pause_ = delay;
  return AcquireWaitEvent{
      kPolicy, resource, attempt, last_error, delay,
      wait_ > absl::ZeroDuration() ? call_time_ + wait_ - now : absl::ZeroDuration()};
}

AcquireEvent AcquireClock::Outcome(absl::string_view resource, const absl::Status& status,
                                   absl::Time now, int attempts, int64_t fence) const {
  AcquireEvent event;
  event.policy = kPolicy;
  event.resource = resource;
  event.status = status;
  event.latency = now - call_time_;
  event.waited = waited_;
  event.attempts = attempts;
  event.fence = status.ok() ? fence : 0;
  event.ttl = status.ok() ? ttl_ : absl::ZeroDuration();
  return event;
}

}  // namespace redlock_internal
}  // namespace dlock
