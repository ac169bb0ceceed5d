#include "dlock/lock/lease_release_extend.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/error_text.h"
#include "dlock/lock/lease_cleanup.h"
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

ReleaseReport::ReleaseReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                             const Lease& lease, absl::Time sent_at, StatusCallback callback,
                             GiveUpFn give_up)
    : core_(std::move(core)),
      policy_(policy),
      resource_(lease.resource),
      token_(give_up != nullptr ? lease.token : std::string()),
      sent_at_(sent_at),
      ttl_(lease.ttl),
      give_up_(give_up),
      callback_(std::move(callback)) {}

void ReleaseReport::operator()(absl::StatusOr<ReleaseNotice> notice) {
  if (give_up_ != nullptr && !notice.ok() && IsUnknownOutcome(notice.status())) {
    give_up_(core_, resource_, token_, sent_at_ + ttl_);
  }
  FinishNoticedRelease(*core_, policy_, resource_, sent_at_, notice, std::move(callback_));
}

ExtendReport::ExtendReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                           const Lease& lease, absl::Duration whole, absl::Time sent_at,
                           LeaseCallback callback, GiveUpFn give_up, absl::string_view what)
    : core_(std::move(core)),
      policy_(policy),
      what_(what),
      lease_(lease),
      whole_(whole),
      sent_at_(sent_at),
      give_up_(give_up),
      callback_(std::move(callback)) {}

void ExtendReport::operator()(absl::Status status) {
  if (give_up_ != nullptr) {
    status = GiveUpOnShortfall(std::move(status), what_, [&] {
      give_up_(core_, lease_.resource, lease_.token, sent_at_ + whole_);
    });
  }
  FinishExtend(*core_, policy_, std::move(lease_), whole_, sent_at_, std::move(status),
               std::move(callback_));
}

absl::Status ReleaseAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                              const Lease& lease, StatusCallback callback,
                              absl::FunctionRef<absl::Status(ReleaseReport)> send,
                              GiveUpFn give_up) {
  absl::Status s = core->CheckRelease(lease);
  if (!s.ok()) return s;
  const absl::Time sent_at = core->loop->Now();
  return send(
      ReleaseReport(std::move(core), policy, lease, sent_at, std::move(callback), give_up));
}

absl::Status ExtendAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                             const Lease& lease, absl::Duration ttl, LeaseCallback callback,
                             absl::FunctionRef<absl::Status(absl::Duration, ExtendReport)> send,
                             GiveUpFn give_up, absl::string_view what) {
  absl::Status s = core->CheckExtend(lease, ttl);
  if (!s.ok()) return s;
  const absl::Duration whole = WholeMillis(ttl);
  const absl::Time sent_at = core->loop->Now();
  return send(whole, ExtendReport(std::move(core), policy, lease, whole, sent_at,
                                  std::move(callback), give_up, what));
}

absl::Status GiveUpOnShortfall(absl::Status status, absl::string_view what,
                               absl::FunctionRef<void()> give_up) {
  if (!IsReplicaShortfall(status)) return status;
  give_up();
  return ErrorStatus(absl::StatusCode::kUnavailable, "%; % was released",
                     {status.message(), what});
}

}  // namespace dlock
