// This header defines the acquire operation every single-server policy
// shares: `SingleServerAcquire` (pending -> cancelled or done), the shared
// end of its reply (`FinishAcquire`: the lease or the error, the
// observer's events of lease_reports.h) and `StartAcquire`, the shape of
// every policy's Acquire around its command. Internal to lock/ (the target
// is private). Call only on the loop's thread.
#ifndef DLOCK_LOCK_SINGLE_SERVER_ACQUIRE_H_
#define DLOCK_LOCK_SINGLE_SERVER_ACQUIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"

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

// The callback of an acquire command: op->OnReply(fence). One type for
// every policy, so each acquire command type's send is compiled once for
// all of them (kept inline in the command's one allocation, as a lambda
// would be).
struct AcquireReply {
  void operator()(absl::StatusOr<int64_t> fence) { op->OnReply(std::move(fence)); }

  std::shared_ptr<SingleServerAcquire> op;
};

// The shape of every policy's Acquire around its command: sends `op`
// (send(op), which returns the command's rejection: then the caller's
// callback never runs) and returns its handle. `send` is passed through as
// it is (no extra allocation on the acquire path).
template <typename Op, typename Send>  // absl::Status(std::shared_ptr<Op>)
absl::StatusOr<AcquireHandle> StartAcquire(std::shared_ptr<Op> op, Send send) {
  std::weak_ptr<Cancellable> weak = op;
  absl::Status s = send(std::move(op));
  if (!s.ok()) return s;
  return AcquireHandle(weak);
}

}  // namespace dlock

#endif  // DLOCK_LOCK_SINGLE_SERVER_ACQUIRE_H_
