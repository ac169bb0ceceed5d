#include "dlock/lock/simple_lock.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_ops.h"

namespace dlock {

struct SimpleLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const SimpleLockOptions& options)
      : LeaseCore(loop, options.observer, options.command_timeout,
                  options.drift_factor, options.drift_constant),
        commands(transport, KeyScheme{options.key_prefix}),
        restart_window(options.restart_window) {
    commands.set_replica_ack(options.replica_ack);
  }

  LockCommands commands;
  const absl::Duration restart_window;
};

namespace {

// Releases `token` after an acquire whose outcome is unknown or unwanted,
// retried while the key could still exist (RunCleanup).
void CleanupToken(std::shared_ptr<SimpleLock::Core> core, std::string resource,
                  std::string token, absl::Time key_expiry) {
  // RunCleanup keeps `core` alive whenever this sender runs.
  SimpleLock::Core* c = core.get();
  RunCleanup(std::move(core), key_expiry,
             [c, resource = std::move(resource), token = std::move(token)](
                 absl::AnyInvocable<void(bool) &&> done) {
               return c->commands.Release(
                   resource, token, c->command_timeout,
                   [done = std::move(done)](absl::Status status) mutable {
                     std::move(done)(absl::IsUnavailable(status) ||
                                     absl::IsDeadlineExceeded(status));
                   });
             });
}

class SimpleAcquireOp : public SingleServerAcquire {
 public:
  using SingleServerAcquire::SingleServerAcquire;

 private:
  void Undo() override {
    CleanupToken(std::static_pointer_cast<SimpleLock::Core>(core()), resource(),
                 token(), sent_at() + ttl());
  }
};

}  // namespace

SimpleLock::SimpleLock(EventLoop* loop, Transport* transport,
                       SimpleLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, options)) {}

SimpleLock::~SimpleLock() { core_->retries.Stop(); }

const KeyScheme& SimpleLock::keys() const { return core_->commands.keys(); }

std::string SimpleLock::ReleaseChannel(absl::string_view resource) const {
  return keys().ChannelKey(resource);
}

Transport* SimpleLock::ReleaseSubscriber() const { return core_->commands.transport(); }

absl::StatusOr<AcquireHandle> SimpleLock::Acquire(absl::string_view resource,
                                                  const AcquireOptions& options,
                                                  LeaseCallback callback) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = core_->CheckTtl(options.ttl);
  if (!s.ok()) return s;
  s = ValidateReplicaAck(core_->commands.replica_ack());
  if (!s.ok()) return s;
  auto op = std::make_shared<SimpleAcquireOp>(core_, "simple", std::string(resource),
                                              NewToken(), WholeMillis(options.ttl),
                                              std::move(callback));
  std::weak_ptr<Cancellable> weak = op;
  s = core_->commands.TryAcquire(
      resource, op->token(), op->ttl(), core_->restart_window, core_->command_timeout,
      [op](absl::StatusOr<int64_t> fence) { op->OnReply(std::move(fence)); });
  if (!s.ok()) return s;
  return AcquireHandle(weak);
}

absl::Status SimpleLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  const absl::Time sent_at = core_->loop->Now();
  return core_->commands.ReleaseNotifying(
      lease.resource, lease.token, core_->command_timeout,
      [core = core_, resource = lease.resource, sent_at,
       callback = std::move(callback)](absl::StatusOr<ReleaseNotice> notice) mutable {
        FinishNoticedRelease(*core, "simple", resource, sent_at, notice,
                             std::move(callback));
      });
}

absl::Status SimpleLock::Extend(const Lease& lease, absl::Duration ttl,
                                LeaseCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  s = core_->CheckTtl(ttl);
  if (!s.ok()) return s;
  s = ValidateReplicaAck(core_->commands.replica_ack());
  if (!s.ok()) return s;
  const absl::Duration whole = WholeMillis(ttl);
  const absl::Time sent_at = core_->loop->Now();
  return core_->commands.Extend(
      lease.resource, lease.token, whole, core_->command_timeout,
      [core = core_, lease = Lease(lease), whole, sent_at,
       callback = std::move(callback)](absl::Status status) mutable {
        if (IsReplicaShortfall(status)) {
          // The master extended a key its replicas may not have: give the
          // lease up rather than hold one a failover could hand to another.
          CleanupToken(core, lease.resource, lease.token, sent_at + whole);
          status = absl::UnavailableError(
              absl::StrCat(status.message(), "; the lease was released"));
        }
        FinishExtend(*core, "simple", std::move(lease), whole, sent_at,
                     std::move(status), std::move(callback));
      });
}

}  // namespace dlock
