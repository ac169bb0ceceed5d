#include "dlock/lock/simple_lock.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lease_release_extend.h"
#include "dlock/lock/single_server_acquire.h"

namespace dlock {

struct SimpleLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const SimpleLockOptions& options)
      : LeaseCore(loop, options, options.replica_ack),
        commands(transport, KeyScheme{options.key_prefix}),
        fencing(options.fencing) {
    commands.set_replica_ack(options.replica_ack);
  }

  LockCommands commands;
  const bool fencing;  // SimpleLockOptions::fencing
};

namespace {

// Releases `token` after an acquire whose outcome is unknown or unwanted,
// retried while the key could still exist (RunCleanup).
void CleanupToken(std::shared_ptr<SimpleLock::Core> core, std::string resource,
                  std::string token, absl::Time key_expiry) {
  // RunCleanup keeps `core` alive whenever this sender runs.
  SimpleLock::Core* c = core.get();
  RunReleaseCleanup(std::move(core), key_expiry,
                    [c, resource = std::move(resource), token = std::move(token)](auto done) {
                      return c->commands.ReleaseNotifying(resource, token,
                                                          c->command_timeout, std::move(done));
                    });
}

// CleanupToken as ReleaseAndReport and ExtendAndReport call it (GiveUpFn).
void GiveUpToken(const std::shared_ptr<LeaseCore>& core, const std::string& resource,
                 const std::string& token, absl::Time key_expiry) {
  CleanupToken(std::static_pointer_cast<SimpleLock::Core>(core), resource, token, key_expiry);
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
  absl::Status s = core_->CheckAcquire(resource, options.ttl);
  if (!s.ok()) return s;
  return StartAcquire(
      std::make_shared<SimpleAcquireOp>(core_, "simple", std::string(resource), NewToken(),
                                        WholeMillis(options.ttl), std::move(callback)),
      [this](std::shared_ptr<SimpleAcquireOp> op) {
        LeaseArgv a;
        return core_->commands
            .AcquireCommand(op->resource(), op->token(), op->ttl(), core_->restart_window, a,
                            core_->fencing)
            .Send(*core_->commands.transport(), core_->command_timeout, AcquireReply{op});
      });
}

absl::Status SimpleLock::CheckAcquireArgs(absl::string_view resource,
                                          const AcquireOptions& options) const {
  return core_->CheckAcquire(resource, options.ttl);
}

absl::Status SimpleLock::Release(const Lease& lease, StatusCallback callback) {
  // An unknown outcome (timed out, connection lost) may mean the release
  // never ran: e.g. it met NOSCRIPT after a SCRIPT FLUSH with later
  // commands already behind it, after its callback had timed out. The
  // compare-and-delete is safe to repeat (the token is ours alone), so it
  // is sent again in the background while the key may still exist (now +
  // the lease's ttl bounds it: ReleaseReport runs GiveUpToken); the caller
  // still hears the first outcome.
  return ReleaseAndReport(
      core_, "simple", lease, std::move(callback),
      [&](ReleaseReport report) {
        LeaseArgv a;
        return core_->commands.ReleaseCommand(lease.resource, lease.token, a)
            .Send(*core_->commands.transport(), core_->command_timeout, std::move(report));
      },
      GiveUpToken);
}

std::string SimpleLock::HandOffLockKey(absl::string_view resource) const {
  return keys().LockKey(resource);
}

Transport* SimpleLock::HandOffTransport() const { return core_->commands.transport(); }

absl::Status SimpleLock::ReleaseForHandOff(const Lease& lease, HandOffRelease how,
                                           StatusCallback callback) const {
  // As Release, with CountingReleaseScript (KEYS: the lock key; the plain
  // release's work, replying 1 + the PUBLISH's receivers) or the hand-off
  // script (handoff_scripts.h: KEYS lock, C:q, C:qx). An unknown outcome
  // is cleaned up by the plain release (GiveUpToken; queued waiters then
  // learn of it from the released token, or from their refresh).
  auto send = [&](ReleaseReport report) {
    ResourceKeys rk(core_->commands.keys().prefix, lease.resource);
    const std::string channel(rk.channel());
    const std::string q = HandOffQueueKey(channel);
    const std::string qx = HandOffQueueExpiryKey(channel);
    const std::string ttl_ms = absl::StrCat(absl::ToInt64Milliseconds(how.entry_ttl));
    const absl::string_view keys[3] = {rk.lock(), q, qx};
    const absl::string_view args[5] = {lease.token, channel, how.waiter_id,
                                       how.rejoin ? "1" : "0", ttl_ms};
    const Script& script = how.hand_off ? HandOffReleaseScript() : CountingReleaseScript();
    return script.Invoke(
        *core_->commands.transport(), absl::MakeConstSpan(keys, how.hand_off ? 3 : 1),
        absl::MakeConstSpan(args, how.hand_off ? 5 : 2), core_->command_timeout,
        [on_listeners = std::move(how.on_listeners),
         report = std::move(report)](absl::StatusOr<Reply> reply) mutable {
          // Counting: 1 + receivers when released; read as the plain reply.
          if (reply.ok() && reply->is_integer() && reply->integer > 1) {
            if (on_listeners) std::move(on_listeners)(reply->integer - 1);
            reply->integer = 1;
          }
          report(ReleaseNoticeReply{}(std::move(reply), {}));
        });
  };
  return ReleaseAndReport(core_, "simple", lease, std::move(callback), send, GiveUpToken);
}

absl::Status SimpleLock::Extend(const Lease& lease, absl::Duration ttl,
                                LeaseCallback callback) {
  // The master extended a key its replicas may not have: the lease is given
  // up (GiveUpToken) rather than held where a failover could hand it to
  // another.
  return ExtendAndReport(
      core_, "simple", lease, ttl, std::move(callback),
      [&](absl::Duration whole, ExtendReport report) {
        LeaseArgv a;
        return core_->commands.ExtendCommand(lease.resource, lease.token, whole, a)
            .Send(*core_->commands.transport(), core_->command_timeout, std::move(report));
      },
      GiveUpToken);
}

}  // namespace dlock
