// Internal to //blocking (namespace blocking_internal): the locks of a
// `BlockingClient` over its connected transports -- the policy stack (see
// the table in blocking_client.h) and the blocking facade of each primitive
// the client hands out (plain, read, write, and the semaphores of
// permit_facades.h). Not part of the API.
//
// Threads: the policies live on the loop thread, the facades are made and
// destroyed on the caller's. Build and Shutdown run on any thread but the
// loop's (they post to it); DestroyOnLoop runs on the loop thread. The
// accessors may be called from any thread once Build returned OK.
//
// Teardown, in this order: Shutdown() (every facade refuses new calls,
// cancels what is in flight and releases what guards still hold), then
// DestroyOnLoop() (the policies; the transports may go after it), then the
// destructor (the inert facades; guards that outlive it keep only their
// facade's gate).
#ifndef DLOCK_BLOCKING_CLIENT_LOCKS_H_
#define DLOCK_BLOCKING_CLIENT_LOCKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/blocking/permit_facades.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace blocking_internal {

class ClientLocks {
 public:
  // Builds the policies over `transports` (named `names`, for RedLock's
  // messages) on `thread`'s loop and the facades over them. The transports
  // must outlive DestroyOnLoop(); `options` is read only here. An error is the
  // policy's own (e.g. RedLock's configuration check); nothing is left to
  // tear down then.
  static absl::StatusOr<std::unique_ptr<ClientLocks>> Build(
      LoopThread* thread, const std::vector<std::unique_ptr<Transport>>& transports,
      const std::vector<std::string>& names, const BlockingClientOptions& options);
  ~ClientLocks();

  ClientLocks(const ClientLocks&) = delete;
  ClientLocks& operator=(const ClientLocks&) = delete;

  // The facade of the client's lock.
  BlockingLock& facade() { return *facade_; }
  // The read or write view of the read-write lock; kInvalidArgument for a
  // client of several servers.
  absl::StatusOr<BlockingLock*> ReadWrite(bool write);
  // The facade of a semaphore of `permits` (PermitFacades::For).
  absl::StatusOr<BlockingLock*> Permits(int64_t permits) { return permits_->For(permits); }

  void Shutdown();
  void DestroyOnLoop();

 private:
  explicit ClientLocks(LoopThread* thread) : thread_(thread) {}
  // Loop thread: the policies.
  absl::Status BuildPolicies(const std::vector<std::unique_ptr<Transport>>& transports,
                             const std::vector<std::string>& names,
                             const BlockingClientOptions& options);

  LoopThread* const thread_;
  // Loop thread.
  std::unique_ptr<dlock::Lock> inner_;
  std::unique_ptr<dlock::Lock> retry_;
  // Single server only: the read-write lock and a RetryLock per view.
  std::unique_ptr<ReadWriteLock> rw_;
  std::unique_ptr<dlock::Lock> read_retry_;
  std::unique_ptr<dlock::Lock> write_retry_;
  // Caller's thread.
  std::unique_ptr<BlockingLock> facade_;
  std::unique_ptr<BlockingLock> read_facade_;
  std::unique_ptr<BlockingLock> write_facade_;
  std::unique_ptr<PermitFacades> permits_;
};

}  // namespace blocking_internal
}  // namespace dlock

#endif  // DLOCK_BLOCKING_CLIENT_LOCKS_H_
