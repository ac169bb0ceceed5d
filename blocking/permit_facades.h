// Internal to //blocking: the semaphores of a `BlockingClient`
// (BlockingClient::Semaphore). One stack per permit count N, built on first
// use and kept until the client goes: Semaphore(N) -> RetryLock -> a
// BlockingLock facade (renewing like the client's own). A permit guard is
// that facade's LockGuard.
//
// Thread-safe: For() may be called from any thread but the loop thread.
// Teardown, by the client's destructor, in this order: Shutdown() (any
// thread but the loop's: closes the door, shuts every facade down, which
// releases every permit still held by a guard), DestroyOnLoop() (on the
// loop thread: the retry locks and semaphores), then the destructor (the
// inert facades).
#ifndef DLOCK_BLOCKING_PERMIT_FACADES_H_
#define DLOCK_BLOCKING_PERMIT_FACADES_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/mutex.h"
#include "dlock/transport/transport.h"

namespace dlock {

class PermitFacades {
 public:
  // `transport`: the client's one server; null when it has several (a
  // semaphore needs a single server: For() then says kInvalidArgument).
  // `semaphore`: the options of every semaphore but its `permits`; each
  // facade renews with `auto_renew`, reporting to `semaphore.observer`.
  PermitFacades(LoopThread* thread, Transport* transport, SemaphoreOptions semaphore,
                bool auto_renew);
  ~PermitFacades();

  PermitFacades(const PermitFacades&) = delete;
  PermitFacades& operator=(const PermitFacades&) = delete;

  // The facade of N = `permits`, built on first use. kInvalidArgument for
  // `permits` outside [1, kMaxPermits] or a client of several servers;
  // kCancelled after Shutdown(); kFailedPrecondition on the loop thread.
  absl::StatusOr<BlockingLock*> For(int64_t permits) ABSL_LOCKS_EXCLUDED(mu_);

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  void DestroyOnLoop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Stack {
    std::unique_ptr<Semaphore> semaphore;  // loop thread
    std::unique_ptr<RetryLock> retry;      // loop thread
    std::unique_ptr<BlockingLock> facade;
  };

  LoopThread* const thread_;
  Transport* const transport_;
  const SemaphoreOptions semaphore_;
  const bool auto_renew_;
  Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, Stack> stacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dlock

#endif  // DLOCK_BLOCKING_PERMIT_FACADES_H_
