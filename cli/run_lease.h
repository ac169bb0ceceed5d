// This header defines `RunLease`: the life of the lease a `dlock run` takes
// on its RunLock -- acquire, renewal by a Watchdog while the command runs,
// release.
//
//   state     | call                 | what happens
//   ----------+----------------------+-----------------------------------
//   idle      | Acquire              | acquiring; `done` gets the lease
//   acquiring | CancelAcquire        | the lock releases what it took
//   held      | Watch                | renewed until Release (or lost)
//   held      | Release              | the watch (if any) ends, released
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_CLI_RUN_LEASE_H_
#define DLOCK_CLI_RUN_LEASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/cli/run_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace cli {

class RunLease {
 public:
  // `observer` (the watchdog's) must outlive this object.
  RunLease(EventLoop* loop, std::unique_ptr<RunLock> lock, LockObserver* observer);
  // Ends the watch, then destroys the watchdog and the lock (their pending
  // callbacks get kCancelled).
  ~RunLease();

  // Starts acquiring `resource`; `done` gets the lease or why not, never
  // inside this call. A non-OK return (bad options): `done` never runs.
  absl::Status Acquire(const std::string& resource, const AcquireOptions& options,
                       std::function<void(absl::StatusOr<Lease>)> done);
  // Gives up a pending Acquire (its `done` does not run).
  void CancelAcquire() { acquire_.Cancel(); }

  // The lease Acquire granted (latest renewal not included).
  const Lease& lease() const { return lease_; }
  // Each resource's fence, in the sorted order of the resources, when the
  // lock is over several resources; nullopt for one resource.
  std::optional<std::vector<int64_t>> SetFences() const;

  // Renews the lease until Release; `on_lost` runs if it is lost. Non-OK
  // when the watchdog refuses the lease (it is then not watched).
  absl::Status Watch(std::function<void(absl::Status)> on_lost);
  // The renewed lease's deadline while the watch is active.
  std::optional<absl::Time> WatchedDeadline() const;

  // Ends the watch and releases the lease; `done` gets the outcome. An
  // error known at once is passed to `done` inside this call.
  void Release(std::function<void(absl::Status)> done);

 private:
  EventLoop* const loop_;
  LockObserver* const observer_;
  std::unique_ptr<RunLock> lock_;
  std::unique_ptr<Watchdog> watchdog_;
  WatchHandle watch_;
  bool watching_ = false;
  AcquireHandle acquire_;
  Lease lease_;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_RUN_LEASE_H_
