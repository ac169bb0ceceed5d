#include "dlock/blocking/client_locks.h"

#include <memory>
#include <utility>

#include "dlock/blocking/client_options.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"

namespace dlock {
namespace blocking_internal {
namespace {

// Loop thread: the policy: FairLock on one server with `fair` (it waits in
// its own queue, nothing goes over it); else the policy under RetryLock:
// SimpleLock, or ReentrantLock, on one server; RedLock (one voting round per
// attempt) over several.
absl::StatusOr<std::unique_ptr<dlock::Lock>> MakeInnerLock(
    EventLoop* loop, const std::vector<std::unique_ptr<Transport>>& transports,
    const std::vector<std::string>& names, const BlockingClientOptions& options) {
  if (transports.size() == 1 && options.fair) {
    FairLockOptions o = PolicyOptions<FairLockOptions>(options);
    o.queue_ttl = options.fair_queue_ttl;
    return std::make_unique<FairLock>(loop, transports[0].get(), o);
  }
  if (transports.size() == 1 && options.reentrant) {
    return std::make_unique<ReentrantLock>(loop, transports[0].get(),
                                           AckedPolicyOptions<ReentrantLockOptions>(options));
  }
  if (transports.size() == 1) {
    return std::make_unique<SimpleLock>(loop, transports[0].get(),
                                        AckedPolicyOptions<SimpleLockOptions>(options));
  }
  RedLockOptions o;
  o.keys.prefix = options.key_prefix;
  o.retry_count = 0;  // one voting round per attempt: RetryLock waits
  o.server_names = names;
  o.observer = options.observer;
  std::vector<Transport*> ts;
  for (auto& t : transports) ts.push_back(t.get());
  absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(loop, ts, o);
  if (!redlock.ok()) return redlock.status();
  return std::unique_ptr<dlock::Lock>(*std::move(redlock));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClientLocks>> ClientLocks::Build(
    LoopThread* thread, const std::vector<std::unique_ptr<Transport>>& transports,
    const std::vector<std::string>& names, const BlockingClientOptions& options) {
  std::unique_ptr<ClientLocks> locks(new ClientLocks(thread));
  absl::Status built = PostAndWait<absl::Status>(thread, [&](Completion<absl::Status> done) {
    done(locks->BuildPolicies(transports, names, options));
  });
  if (!built.ok()) return built;
  const bool renew = options.auto_renew;
  if (locks->rw_ != nullptr) {
    locks->read_facade_ = std::make_unique<BlockingLock>(thread, locks->read_retry_.get(),
                                                         FacadeOptions(renew, options.observer));
    locks->write_facade_ = std::make_unique<BlockingLock>(thread, locks->write_retry_.get(),
                                                          FacadeOptions(renew, options.observer));
  }
  dlock::Lock* top = locks->retry_ != nullptr ? locks->retry_.get() : locks->inner_.get();
  locks->facade_ =
      std::make_unique<BlockingLock>(thread, top, FacadeOptions(renew, options.observer));
  locks->permits_ = std::make_unique<PermitFacades>(
      thread, transports.size() == 1 ? transports[0].get() : nullptr,
      PolicyOptions<SemaphoreOptions>(options), renew);
  return locks;
}

absl::Status ClientLocks::BuildPolicies(const std::vector<std::unique_ptr<Transport>>& transports,
                                        const std::vector<std::string>& names,
                                        const BlockingClientOptions& options) {
  EventLoop* loop = thread_->loop();
  absl::StatusOr<std::unique_ptr<dlock::Lock>> inner =
      MakeInnerLock(loop, transports, names, options);
  if (!inner.ok()) return inner.status();
  inner_ = *std::move(inner);
  // FairLock waits in its own server-side queue: no RetryLock over it
  // (whose attempts, with wait 0, would never queue).
  if (options.fair) return absl::OkStatus();
  RetryLockOptions r;
  r.observer = options.observer;
  // Woken by the inner lock's release notifications (its channel, its
  // transport; RedLock: the first server's), the backoff covering the rest.
  retry_ = std::make_unique<RetryLock>(loop, inner_.get(), r);
  if (transports.size() == 1) {
    rw_ = std::make_unique<ReadWriteLock>(loop, transports[0].get(),
                                          AckedPolicyOptions<ReadWriteLockOptions>(options));
    RetryLockOptions rr;
    rr.observer = options.observer;
    read_retry_ = std::make_unique<RetryLock>(loop, &rw_->reader(), rr);
    write_retry_ = std::make_unique<RetryLock>(loop, &rw_->writer(), rr);
  }
  return absl::OkStatus();
}

ClientLocks::~ClientLocks() = default;

absl::StatusOr<BlockingLock*> ClientLocks::ReadWrite(bool write) {
  BlockingLock* facade = write ? write_facade_.get() : read_facade_.get();
  if (facade == nullptr) {
    return absl::InvalidArgumentError(
        "BlockingClient: read-write locks need a single server (not RedLock)");
  }
  return facade;
}

void ClientLocks::Shutdown() {
  facade_->Shutdown();
  if (read_facade_ != nullptr) read_facade_->Shutdown();
  if (write_facade_ != nullptr) write_facade_->Shutdown();
  permits_->Shutdown();  // the same, for permit guards
}

void ClientLocks::DestroyOnLoop() {
  // Policies stop their timers and background cleanups.
  permits_->DestroyOnLoop();
  retry_.reset();
  read_retry_.reset();
  write_retry_.reset();
  rw_.reset();
  inner_.reset();
}

}  // namespace blocking_internal
}  // namespace dlock
