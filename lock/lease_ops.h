// This header defines what SimpleLock and ReentrantLock share around their
// one-server scripts: the end of an acquire (FinishAcquire) and the
// background retries of cleanups after unknown outcomes. Internal to lock/.
#ifndef DLOCK_LOCK_LEASE_OPS_H_
#define DLOCK_LOCK_LEASE_OPS_H_

#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

// The shared end of a single-server acquire (SimpleLock, ReentrantLock):
// turns the acquire script's outcome into what the caller gets and reports it
// to `observer` as an AcquireEvent of `policy`. A granted key whose reply came
// at or after `deadline` (send time + ttl - drift) is no lease: `undo` runs and
// the result is kDeadlineExceeded. `undo` also runs for any failure other than
// kAborted, since the script may have run (an unknown outcome).
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
  absl::flat_hash_set<TimerId> timers_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_OPS_H_
