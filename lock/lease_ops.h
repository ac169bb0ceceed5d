// This header defines what the single-server policies (SimpleLock,
// ReentrantLock, Semaphore, ReadWriteLock, FairLock) share around their
// one-server scripts, so each idea has one home:
//   - LeaseCore: loop, observer, timeout and drift options, the lease TTL
//     check and the background cleanups of one lock (each lock's Core
//     derives from it);
//   - SingleServerAcquire: the acquire operation (pending -> cancelled or
//     done) and FinishAcquire (the observer's events: lease_reports.h);
//   - RunCleanup: the background cleanup after an unknown outcome, retried
//     while the key could still exist;
//   - FinishRelease / FinishExtend / FinishNoticedRelease: the observer's
//     events and the extended lease;
//   - StartAcquire / ReleaseAndReport / ExtendAndReport: the shape of every
//     policy's Acquire, Release and Extend around its command.
// Internal to lock/ (the target is private). Call only on the loop's thread.
#ifndef DLOCK_LOCK_LEASE_OPS_H_
#define DLOCK_LOCK_LEASE_OPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_command.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lease_reports.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

// The shared end of a single-server acquire (SimpleLock, ReentrantLock):
// turns the acquire script's outcome into what the caller gets and reports it
// to `observer` as an AcquireEvent of `policy`. A granted key whose reply came
// at or after `deadline` (send time + ttl - drift) is no lease: `undo` runs,
// it is reported as a late grant (OnLateGrant, kLateGrantExpired) and the
// result is kDeadlineExceeded. `undo` also runs for any failure other than
// kAborted or a young data set, since the script may have run (an unknown
// outcome).
struct AcquireAttempt {
  absl::string_view policy;
  absl::string_view resource;
  absl::string_view token;
  absl::Duration ttl;
  absl::Time sent_at;
  absl::Time deadline;
};
absl::StatusOr<Lease> FinishAcquire(const AcquireAttempt& attempt,
                                    absl::StatusOr<int64_t> fence, absl::Time now,
                                    LockObserver* observer,
                                    absl::FunctionRef<void()> undo);

// Background retries of cleanups after unknown outcomes (SimpleLock,
// ReentrantLock). Stop() -- run when the lock is destroyed, since its
// transport may be destroyed right after -- cancels every timer not yet run
// and ignores later RunLater calls; the keys then expire by their TTL. A
// callback must keep alive whatever owns this object until it runs.
class BackgroundRetries {
 public:
  explicit BackgroundRetries(EventLoop* loop) : loop_(loop) {}
  void RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn);
  void Stop();

 private:
  EventLoop* const loop_;
  bool stopped_ = false;
  // Pending cleanup timers: a few at most (a vector: smaller code than a
  // hash set).
  std::vector<TimerId> timers_;
};

// The state of one single-server lock that its operations share (held by
// shared_ptr, so the lock may be destroyed with operations in flight).
//
// The policy's OPTIONS are validated once, here, when the policy is
// created; each operation then returns the stored verdict (kInvalidArgument)
// from the call, before anything is sent:
//   release_check: command_timeout > 0;
//   extend_check:  that, ValidateReplicaAck(replica_ack), `extend_extra`;
//   acquire_check: that, restart_window >= 0, `acquire_extra`.
// (`*_extra`: the policy's own options, e.g. the semaphore's permits.)
struct LeaseCore {
  LeaseCore(EventLoop* loop, const LeaseOptions& options,
            const ReplicaAckOptions& replica_ack = ReplicaAckOptions(),
            absl::Status extend_extra = absl::OkStatus(),
            absl::Status acquire_extra = absl::OkStatus());

  // DriftAllowance (lease_rules.h) under this lock's options.
  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, drift_factor, drift_constant);
  }
  // ValidateLeaseTtl (lease_rules.h) under this lock's drift options.
  absl::Status CheckTtl(absl::Duration ttl) const {
    return ValidateLeaseTtl(ttl, kMaxTtl, drift_factor, drift_constant);
  }
  // The checks of every Acquire: acquire_check, ValidateResource and
  // CheckTtl. kInvalidArgument when one fails.
  absl::Status CheckAcquire(absl::string_view resource, absl::Duration ttl) const;
  // The checks of every Extend: extend_check, ValidateResourceToken and
  // CheckTtl.
  absl::Status CheckExtend(const Lease& lease, absl::Duration ttl) const;
  // The checks of every Release: release_check and ValidateResourceToken.
  absl::Status CheckRelease(const Lease& lease) const;

  EventLoop* const loop;
  LockObserver* const observer;
  const absl::Duration command_timeout;
  const double drift_factor;
  const absl::Duration drift_constant;
  const absl::Duration restart_window;
  const ReplicaAckOptions replica_ack;
  const absl::Status release_check;
  const absl::Status extend_check;
  const absl::Status acquire_check;
  // Cleanups after unknown outcomes; each callback holds the core.
  BackgroundRetries retries{loop};
};

// One cleanup command: sends it and calls `done(unknown)` once, with
// unknown = true when its outcome is unknown and worth another attempt.
// Returns the transport's rejection (then `done` never runs).
using CleanupSend =
    absl::AnyInvocable<absl::Status(absl::AnyInvocable<void(bool unknown) &&> done)>;

// Whether a command that failed with `status` may still have run on the
// server (kUnavailable, kDeadlineExceeded): an unknown outcome.
bool IsUnknownOutcome(const absl::Status& status);
inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

// RunCleanup for a release-like command whose failure is unknown exactly
// when IsUnknownOutcome: send(on_result) sends it, on_result taking an
// absl::Status or an absl::StatusOr<T>.
template <typename Send>
void RunReleaseCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry, Send send) {
  RunCleanup(std::move(core), key_expiry,
             [send = std::move(send)](absl::AnyInvocable<void(bool) &&> done) mutable {
               return send([done = std::move(done)](const auto& result) mutable {
                 std::move(done)(IsUnknownOutcome(StatusOf(result)));
               });
             });
}

// Runs `send` now and, while its outcome stays unknown, again every 100 ms,
// at most 3 times in all and only while the key could still exist (before
// `key_expiry`). `core` is kept alive until the last attempt ends; its
// retries are stopped when the lock is destroyed. A rejected send ends the
// cleanup: the key expires by its TTL.
void RunCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                CleanupSend send);

// A single-server acquire in flight: pending until the reply (OnReply) or
// Cancel(). Cancelled: the callback is dropped inside Cancel(), and a reply
// other than kAborted runs Undo() (the key may be ours); a grant is also
// reported as a late grant (kLateGrantCancelled). Done: FinishAcquire
// reports the AcquireEvent and runs Undo() where the outcome is unknown.
// Each policy derives its operation and says how to undo it.
class SingleServerAcquire : public Cancellable {
 public:
  // The send time is now (core->loop->Now()).
  SingleServerAcquire(std::shared_ptr<LeaseCore> core, absl::string_view policy,
                      std::string resource, std::string token, absl::Duration ttl,
                      LeaseCallback callback);

  const std::string& resource() const { return resource_; }
  const std::string& token() const { return token_; }
  absl::Duration ttl() const { return ttl_; }
  absl::Time sent_at() const { return sent_at_; }

  bool Cancel() override;
  // The script's outcome: the fence, kAborted when held, or an error.
  void OnReply(absl::StatusOr<int64_t> fence);

 protected:
  const std::shared_ptr<LeaseCore>& core() const { return core_; }
  // Gives back what this acquire may have taken, in the background.
  virtual void Undo() = 0;

 private:
  enum class State { kPending, kCancelled, kDone };

  std::shared_ptr<LeaseCore> core_;
  absl::string_view policy_;
  std::string resource_;
  std::string token_;
  absl::Duration ttl_;
  absl::Time sent_at_;
  LeaseCallback callback_;
  State state_ = State::kPending;
};

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

// The three steps every policy's operations share, so each policy says only
// which command it sends. ReleaseAndReport and ExtendAndReport check first
// (LeaseCore::CheckRelease / CheckExtend: kInvalidArgument from the call). `send` gets the callable its command must call
// back exactly once; it returns the command's rejection (then nothing is
// reported and the caller's callback never runs). Callables are passed
// through as they are (no extra allocation on the acquire/release path).
//
// StartAcquire: sends `op` (send(op)) and returns its handle.
template <typename Op, typename Send>  // absl::Status(std::shared_ptr<Op>)
absl::StatusOr<AcquireHandle> StartAcquire(std::shared_ptr<Op> op, Send send) {
  std::weak_ptr<Cancellable> weak = op;
  absl::Status s = send(std::move(op));
  if (!s.ok()) return s;
  return AcquireHandle(weak);
}

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

#endif  // DLOCK_LOCK_LEASE_OPS_H_
