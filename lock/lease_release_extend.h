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
#include <string>
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

// Gives back in the background (RunCleanup) what `token` may hold of
// `resource` under `core` (the policy's own core, a LeaseCore), the key
// expiring by `key_expiry` at the latest: after a release of unknown
// outcome, or an extend that too few replicas acknowledged.
using GiveUpFn = void (*)(const std::shared_ptr<LeaseCore>& core, const std::string& resource,
                          const std::string& token, absl::Time key_expiry);

// The callback of every policy's release command: ONE type for all of them,
// so each command type's LeaseCommand::Send is compiled once, not once per
// policy. Runs `give_up` first (when set) if the outcome is unknown (the
// release may not have run; the key may exist until sent_at + lease.ttl),
// then reports by FinishNoticedRelease.
class ReleaseReport {
 public:
  ReleaseReport(std::shared_ptr<LeaseCore> core, absl::string_view policy, const Lease& lease,
                absl::Time sent_at, StatusCallback callback, GiveUpFn give_up);
  void operator()(absl::StatusOr<ReleaseNotice> notice);

 private:
  std::shared_ptr<LeaseCore> core_;
  absl::string_view policy_;  // a literal
  std::string resource_;
  std::string token_;  // only with give_up_
  absl::Time sent_at_;
  absl::Duration ttl_;
  GiveUpFn give_up_;
  StatusCallback callback_;
};

// The callback of every policy's extend command (one type, as
// ReleaseReport). An extend to `whole` sent at `sent_at`: a replica
// shortfall runs `give_up` (when set) and reads as GiveUpOnShortfall's
// status naming `what`; then FinishExtend reports it.
class ExtendReport {
 public:
  ExtendReport(std::shared_ptr<LeaseCore> core, absl::string_view policy, const Lease& lease,
               absl::Duration whole, absl::Time sent_at, LeaseCallback callback,
               GiveUpFn give_up, absl::string_view what);
  void operator()(absl::Status status);

 private:
  std::shared_ptr<LeaseCore> core_;
  absl::string_view policy_;  // a literal
  absl::string_view what_;    // a literal
  Lease lease_;
  absl::Duration whole_;
  absl::Time sent_at_;
  GiveUpFn give_up_;
  LeaseCallback callback_;
};

// The shape of every policy's Release and Extend around its command, so
// each policy says only which command it sends. Both check first
// (LeaseCore::CheckRelease / CheckExtend: kInvalidArgument from the call).
// `send` gets the callable its command must call back exactly once (kept
// inside the command's one allocation: no extra allocation on the release
// path); it returns the command's rejection (then nothing is reported and
// the caller's callback never runs).
//
// ReleaseAndReport: send(report), report taking
// absl::StatusOr<ReleaseNotice> (ReleaseReport; `give_up` on an unknown
// outcome).
absl::Status ReleaseAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                              const Lease& lease, StatusCallback callback,
                              absl::FunctionRef<absl::Status(ReleaseReport)> send,
                              GiveUpFn give_up = nullptr);

// ExtendAndReport: send(whole, report) for an extend to whole =
// WholeMillis(ttl), report taking absl::Status (ExtendReport; `give_up`
// and `what` on a replica shortfall).
absl::Status ExtendAndReport(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                             const Lease& lease, absl::Duration ttl, LeaseCallback callback,
                             absl::FunctionRef<absl::Status(absl::Duration, ExtendReport)> send,
                             GiveUpFn give_up = nullptr, absl::string_view what = "the lease");

// An extend's status after a replica shortfall (replica_ack.h): runs
// `give_up` (release what the extend kept, in the background) and returns
// kUnavailable "<shortfall>; <what> was released". Any other status as is.
absl::Status GiveUpOnShortfall(absl::Status status, absl::string_view what,
                               absl::FunctionRef<void()> give_up);

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_RELEASE_EXTEND_H_
