// This header defines what SimpleLock and ReentrantLock share around their
// one-server scripts, so each idea has one home:
//   - LeaseCore: loop, observer, timeout and drift options, the lease TTL
//     check and the background cleanups of one lock (each lock's Core
//     derives from it);
//   - SingleServerAcquire: the acquire operation (pending -> cancelled or
//     done), FinishAcquire and the observer's AcquireEvent;
//   - RunCleanup: the background cleanup after an unknown outcome, retried
//     while the key could still exist;
//   - FinishRelease / FinishExtend: the observer's events and the extended
//     lease.
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
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

// The shared end of a single-server acquire (SimpleLock, ReentrantLock):
// turns the acquire script's outcome into what the caller gets and reports it
// to `observer` as an AcquireEvent of `policy`. A granted key whose reply came
// at or after `deadline` (send time + ttl - drift) is no lease: `undo` runs and
// the result is kDeadlineExceeded. `undo` also runs for any failure other than
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
struct LeaseCore {
  LeaseCore(EventLoop* loop, LockObserver* observer, absl::Duration command_timeout,
            double drift_factor, absl::Duration drift_constant)
      : loop(loop),
        observer(ObserverOrNoop(observer)),
        command_timeout(command_timeout),
        drift_factor(drift_factor),
        drift_constant(drift_constant) {}

  // DriftAllowance (lease_rules.h) under this lock's options.
  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, drift_factor, drift_constant);
  }
  // ValidateLeaseTtl (lease_rules.h) under this lock's drift options.
  absl::Status CheckTtl(absl::Duration ttl) const {
    return ValidateLeaseTtl(ttl, kMaxTtl, drift_factor, drift_constant);
  }

  EventLoop* const loop;
  LockObserver* const observer;
  const absl::Duration command_timeout;
  const double drift_factor;
  const absl::Duration drift_constant;
  // Cleanups after unknown outcomes; each callback holds the core.
  BackgroundRetries retries{loop};
};

// One cleanup command: sends it and calls `done(unknown)` once, with
// unknown = true when its outcome is unknown and worth another attempt.
// Returns the transport's rejection (then `done` never runs).
using CleanupSend =
    absl::AnyInvocable<absl::Status(absl::AnyInvocable<void(bool unknown) &&> done)>;

// Runs `send` now and, while its outcome stays unknown, again every 100 ms,
// at most 3 times in all and only while the key could still exist (before
// `key_expiry`). `core` is kept alive until the last attempt ends; its
// retries are stopped when the lock is destroyed. A rejected send ends the
// cleanup: the key expires by its TTL.
void RunCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                CleanupSend send);

// A single-server acquire in flight: pending until the reply (OnReply) or
// Cancel(). Cancelled: the callback is dropped inside Cancel(), and a reply
// other than kAborted runs Undo() (the key may be ours). Done: FinishAcquire
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

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_OPS_H_
