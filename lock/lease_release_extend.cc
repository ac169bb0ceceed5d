#include "dlock/lock/lease_release_extend.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/error_text.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/lock/reply_status.h"

namespace dlock {

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
  return ErrorStatus(absl::StatusCode::kUnavailable, "%; % was released",
                     {status.message(), what});
}

}  // namespace dlock
