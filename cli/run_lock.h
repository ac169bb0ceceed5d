// This header defines `RunLock`: the lock a `dlock run` takes, built from its
// options over a Session's servers.
//
//   options                    | lock
//   ---------------------------+------------------------------------------
//   --permits N (one server)   | Semaphore (+ RetryLock with --wait)
//   --fair (one server)        | FairLock (waits in its own queue)
//   one server                 | ReadWriteLock: its reader with --shared,
//                              | else its writer (+ RetryLock with --wait)
//   several servers            | RedLock
//   several RESOURCEs          | a ResourceSetLock over the lock above
//
// Not thread-safe: call only on the thread running the Session's loop.
#ifndef DLOCK_CLI_RUN_LOCK_H_
#define DLOCK_CLI_RUN_LOCK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/session.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/redlock/redlock.h"

namespace dlock {
namespace cli {

class RunLock {
 public:
  // The lock for `run` over `session`'s servers, reporting to `observer`
  // (both must outlive it). A configuration the lock refuses (e.g. RedLock
  // given the same Redis instance twice) is its status (kInvalidArgument).
  static absl::StatusOr<std::unique_ptr<RunLock>> Build(Session& session,
                                                        const CommonOptions& common,
                                                        const RunOptions& run,
                                                        LockObserver* observer);
  // Destroys the outer lock first; pending callbacks get kCancelled.
  ~RunLock();

  Lock& lock() const { return *lock_; }
  // True when the lock is a ResourceSetLock over several resources.
  bool is_set() const { return set_ != nullptr; }

 private:
  RunLock(Session& session, const CommonOptions& common, const RunOptions& run,
          LockObserver* observer)
      : s_(session), common_(common), run_(run), observer_(observer) {}

  absl::Status Build();
  absl::Status BuildResourceLock();
  absl::Status BuildRedLock();
  void BuildSemaphore();
  // The options every single-server policy of a run shares: key prefix,
  // command timeout, observer and --restart-window.
  void SetLeaseOptions(LeaseOptions& o) const;
  // With --wait: a RetryLock around `lock_`.
  void WrapInRetry();

  Session& s_;
  const CommonOptions& common_;
  const RunOptions& run_;
  LockObserver* const observer_;

  std::unique_ptr<ReadWriteLock> rw_;
  std::unique_ptr<Semaphore> semaphore_;
  std::unique_ptr<RetryLock> retry_;
  std::unique_ptr<FairLock> fair_;
  std::unique_ptr<RedLock> redlock_;
  std::unique_ptr<ResourceSetLock> set_;
  Lock* lock_ = nullptr;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_RUN_LOCK_H_
