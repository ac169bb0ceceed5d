// This header defines the steps every single-server policy's Release and
// Extend share around its command: the checks (LeaseCore), the observer's
// ReleaseEvent / ExtendEvent (FinishRelease, FinishExtend,
// FinishNoticedRelease), the renewed lease, and an extend's replica
// shortfall (GiveUpOnShortfall); ReleaseAndReport and ExtendAndReport put
// them together. Internal to lock/ (the target is private). Call only on
// the loop's thread.
#ifndef DLOCK_LOCK_LEASE_RELEASE_EXTEND_H_
#define DLOCK_LOCK_LEASE_RELEASE_EXTEND_H_

#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_command.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"

namespace dlock {

// Reports a release's ReleaseEvent (latency from `sent_at`), then runs
// `callback` with `status`.
void FinishRelease(const LeaseCore& core, absl::string_view policy,
                   absl::string_view resource, absl::Time sent_at,
                   absl::Status status, absl::string_view warning,
                   StatusCallback callback);

// Reports an extend's ExtendEvent (latency from `sent_at`, ttl `ttl`), then
// runs `callback` with `status`, or when OK with `lease` renewed: ttl `ttl`
// and deadline sent_at + ttl - drift.
void FinishExtend(const LeaseCore& core, absl::string_view policy, Lease lease,
                  absl::Duration ttl, absl::Time sent_at, absl::Status status,
                  LeaseCallback callback);

// Reports a release whose reply told whether its notification went out
// (FinishRelease), with UnpublishedReleaseWarning when it did not: shared by
// every policy whose release script publishes.
void FinishNoticedRelease(const LeaseCore& core, absl::string_view policy,
                          absl::string_view resource, absl::Time sent_at,
                          const absl::StatusOr<ReleaseNotice>& notice,
                          StatusCallback callback);

// The shape of every policy's Release and Extend around its command, so
// each policy says only which command it sends. Both check first
// (LeaseCore::CheckRelease / CheckExtend: kInvalidArgument from the call).
// `send` gets the callable its command must call back exactly once; it
// returns the command's rejection (then nothing is reported and the
// caller's callback never runs). Callables are passed through as they are
// (no extra allocation on the release path).
//
// ReleaseAndReport: send(on_notice), on_notice taking
// absl::StatusOr<ReleaseNotice>; reported by FinishNoticedRelease.
template <typename Send>
absl::Status ReleaseAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                              const Lease& lease, StatusCallback callback, Send send) {
  absl::Status s = core->CheckRelease(lease);
  if (!s.ok()) return s;
  const absl::Time sent_at = core->loop->Now();
  return send([core = std::move(core), policy, resource = lease.resource, sent_at,
               callback = std::move(callback)](absl::StatusOr<ReleaseNotice> notice) mutable {
    FinishNoticedRelease(*core, policy, resource, sent_at, notice, std::move(callback));
  });
}

// ExtendAndReport: send(whole, on_status) for an extend to whole =
// WholeMillis(ttl), on_status taking absl::Status; `after(status, lease,
// key_expiry)` may map the status first (key_expiry = send time + whole),
// then FinishExtend reports it.
template <typename Send, typename After>
absl::Status ExtendAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                             const Lease& lease, absl::Duration ttl, LeaseCallback callback,
                             Send send, After after) {
  absl::Status s = core->CheckExtend(lease, ttl);
  if (!s.ok()) return s;
  const absl::Duration whole = WholeMillis(ttl);
  const absl::Time sent_at = core->loop->Now();
  return send(whole, [core = std::move(core), policy, lease = Lease(lease), whole, sent_at,
                      after = std::move(after),
                      callback = std::move(callback)](absl::Status status) mutable {
    status = after(std::move(status), lease, sent_at + whole);
    FinishExtend(*core, policy, std::move(lease), whole, sent_at, std::move(status),
                 std::move(callback));
  });
}
template <typename Send>
absl::Status ExtendAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                             const Lease& lease, absl::Duration ttl, LeaseCallback callback,
                             Send send) {
  return ExtendAndReport(std::move(core), policy, lease, ttl, std::move(callback),
                         std::move(send),
                         [](absl::Status status, const Lease&, absl::Time) { return status; });
}

// An extend's status after a replica shortfall (replica_ack.h): runs
// `give_up` (release what the extend kept, in the background) and returns
// kUnavailable "<shortfall>; <what> was released". Any other status as is.
absl::Status GiveUpOnShortfall(absl::Status status, absl::string_view what,
                               absl::FunctionRef<void()> give_up);

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_RELEASE_EXTEND_H_
