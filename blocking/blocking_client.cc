#include "dlock/blocking/blocking_client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/blocking/client_connections.h"
#include "dlock/blocking/client_locks.h"
#include "dlock/blocking/client_options.h"
#include "dlock/blocking/post_and_wait.h"

namespace dlock {

using blocking_internal::CheckClientOptions;
using blocking_internal::ClientConnections;
using blocking_internal::ClientLocks;

BlockingClient::BlockingClient(BlockingClientOptions options,
                               std::unique_ptr<LoopThread> owned_thread, LoopThread* thread)
    : options_(std::move(options)),
      owned_thread_(std::move(owned_thread)),
      thread_(thread),
      connections_(std::make_unique<ClientConnections>()) {}

absl::StatusOr<std::unique_ptr<BlockingClient>> BlockingClient::Create(
    LoopThread* thread, TransportFactory make_transports, BlockingClientOptions options) {
  if (thread == nullptr || make_transports == nullptr) {
    return absl::InvalidArgumentError("BlockingClient: null loop thread or transport factory");
  }
  absl::Status valid = CheckClientOptions(options, /*servers=*/1);
  if (!valid.ok()) return valid;
  if (thread->InLoopThread()) {
    return absl::FailedPreconditionError(
        "BlockingClient::Create on its own loop thread would deadlock");
  }
  std::unique_ptr<BlockingClient> client(new BlockingClient(std::move(options), nullptr, thread));
  absl::Status started = client->Start(std::move(make_transports), {});
  if (!started.ok()) return started;  // ~BlockingClient tears down
  return client;
}

absl::Status BlockingClient::Start(TransportFactory make_transports,
                                   std::vector<std::string> names) {
  // 1. Make the transports on the loop thread and wait for the connection
  //    (or a quorum), bounded by connect_timeout.
  absl::Status connected = PostAndWait<absl::Status>(
      thread_, [&](Completion<absl::Status> done) {
        connections_->Adopt(thread_->loop(), std::move(make_transports)(thread_->loop()),
                            std::move(names), options_, std::move(done));
      });
  server_count_ = connections_->size();
  // Create checked the options as for one server; the factory may have made
  // several, and options that need a single server (min_replicas, fair,
  // reentrant) must be refused, not ignored.
  absl::Status valid = CheckClientOptions(options_, server_count_);
  if (!valid.ok()) return valid;
  if (!connected.ok()) return connected;
  // 2. The policy stack and the facades.
  absl::StatusOr<std::unique_ptr<ClientLocks>> locks = ClientLocks::Build(
      thread_, connections_->transports(), connections_->names(), options_);
  if (!locks.ok()) return locks.status();
  locks_ = *std::move(locks);
  return absl::OkStatus();
}

BlockingClient::~BlockingClient() {
  // 1. The facades: calls that begin from now on get kCancelled; acquires in
  //    flight are cancelled (their callers get kCancelled); leases still
  //    held by guards are released (answered before it returns); every call
  //    that had begun has returned. The watchdog is gone.
  if (locks_ != nullptr) locks_->Shutdown();
  // 2. Let the connections answer what is still in flight -- the minority
  //    of a RedLock release (reported at quorum), a NOSCRIPT fallback, the
  //    release of a cancelled attempt's token -- with the policies still
  //    alive to send what those replies call for (a late grant's
  //    re-release); then the policies (they stop their timers and background
  //    cleanups) and what their destruction sent; then close. The whole
  //    wait is bounded by command_timeout (never started: close at once).
  (void)PostAndWait<absl::Status>(thread_, [this](Completion<absl::Status> done) {
    EventLoop* loop = thread_->loop();
    const absl::Time deadline =
        loop->Now() + (locks_ != nullptr ? options_.command_timeout : absl::ZeroDuration());
    connections_->Drain(loop, deadline, [this, loop, deadline, done = std::move(done)]() mutable {
      if (locks_ != nullptr) locks_->DestroyOnLoop();
      connections_->DrainAndClose(loop, deadline,
                                  [done = std::move(done)]() mutable { done(absl::OkStatus()); });
    });
  });
  // ConnectBlockingClient: runs what is still posted, lets libuv deliver the close
  // callbacks and joins the thread. Create: the caller's thread stays.
  owned_thread_.reset();
  // Inert since Shutdown: touches neither the loop nor the lock. Guards
  // that outlive it only keep its gate.
  locks_.reset();
}

BlockingLock& BlockingClient::facade() { return locks_->facade(); }

absl::StatusOr<LockGuard> BlockingClient::TryLock(absl::string_view resource,
                                                  absl::Duration ttl) {
  return locks_->facade().TryLock(resource, ttl);
}

absl::StatusOr<LockGuard> BlockingClient::Lock(absl::string_view resource,
                                               absl::Duration ttl, absl::Duration wait) {
  return locks_->facade().Lock(resource, ttl, wait);
}

absl::StatusOr<LockGuard> BlockingClient::Semaphore(absl::string_view resource,
                                                    int64_t permits, absl::Duration ttl,
                                                    absl::Duration wait) {
  if (options_.min_replicas > 0) {
    return absl::InvalidArgumentError(
        "BlockingClient::Semaphore: semaphores do not wait for replicas (min_replicas "
        "must be 0)");
  }
  absl::StatusOr<BlockingLock*> facade = locks_->Permits(permits);
  if (!facade.ok()) return facade.status();
  return (*facade)->Lock(resource, ttl, wait);
}

absl::StatusOr<LockGuard> BlockingClient::ReadLock(absl::string_view resource,
                                                   absl::Duration ttl, absl::Duration wait) {
  absl::StatusOr<BlockingLock*> facade = locks_->ReadWrite(/*write=*/false);
  if (!facade.ok()) return facade.status();
  return (*facade)->Lock(resource, ttl, wait);
}

absl::StatusOr<LockGuard> BlockingClient::WriteLock(absl::string_view resource,
                                                    absl::Duration ttl, absl::Duration wait) {
  absl::StatusOr<BlockingLock*> facade = locks_->ReadWrite(/*write=*/true);
  if (!facade.ok()) return facade.status();
  return (*facade)->Lock(resource, ttl, wait);
}

absl::StatusOr<MultiLockGuard> BlockingClient::MultiLock(std::vector<std::string> resources,
                                                         absl::Duration ttl,
                                                         absl::Duration wait) {
  AcquireOptions options;
  options.ttl = ttl;
  options.wait = wait;
  absl::StatusOr<std::vector<LockGuard>> guards =
      locks_->facade().AcquireAll(std::move(resources), std::move(options));
  if (!guards.ok()) return guards.status();
  return MultiLockGuard(*std::move(guards));
}

}  // namespace dlock
