#include "dlock/lock/read_write_lock.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_ops.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/tokens.h"
#include "dlock/transport/reply.h"

namespace dlock {

struct ReadWriteLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const ReadWriteLockOptions& options)
      : LeaseCore(loop, options),
        transport(transport),
        commands(transport, KeyScheme{options.key_prefix}),
        writer_intent_ttl(options.writer_intent_ttl) {
    commands.set_replica_ack(options.replica_ack);
  }

  const KeyScheme& keys() const { return commands.keys(); }

  Transport* const transport;
  // The writer's release and extend: the plain lock's scripts.
  LockCommands commands;
  const absl::Duration writer_intent_ttl;
};

namespace {

using Core = ReadWriteLock::Core;

// Sends the reader release script for `token`.
absl::Status SendReadRelease(
    Core& core, absl::string_view resource, absl::string_view token,
    absl::AnyInvocable<void(absl::StatusOr<Reply>) &&> cb) {
  return ReadReleaseScript().Run(
      *core.transport, {ReadersKey(core.keys(), resource)},
      {std::string(token), core.keys().ChannelKey(resource)}, core.command_timeout,
      std::move(cb));
}

// Gives back what `token` may hold of `resource` (the writer's key or the
// reader's entry), retried in the background while the key could still
// exist: after an unknown outcome, a cancelled acquire, or a grant or extend
// its replicas did not acknowledge.
void GiveUp(std::shared_ptr<Core> core, bool write, std::string resource, std::string token,
            absl::Time key_expiry) {
  Core* c = core.get();
  RunReleaseCleanup(std::move(core), key_expiry,
                    [c, write, resource = std::move(resource),
                     token = std::move(token)](auto done) {
                      if (write) {
                        return c->commands.Release(resource, token, c->command_timeout,
                                                   std::move(done));
                      }
                      return SendReadRelease(*c, resource, token, std::move(done));
                    });
}

// A shortfall of acknowledgements on an extend: the lease is given up.
struct AfterExtend {
  absl::Status operator()(absl::Status status, const Lease& lease,
                          absl::Time key_expiry) const {
    return GiveUpOnShortfall(std::move(status), "the lease", [&] {
      GiveUp(core, write, lease.resource, lease.token, key_expiry);
    });
  }
  std::shared_ptr<Core> core;
  bool write;
};

class RwAcquireOp : public SingleServerAcquire {
 public:
  RwAcquireOp(std::shared_ptr<Core> core, bool write, std::string resource,
              absl::Duration ttl, LeaseCallback callback)
      : SingleServerAcquire(core, write ? "write" : "read", std::move(resource),
                            NewToken(), ttl, std::move(callback)),
        write_(write) {}

 private:
  void Undo() override {
    GiveUp(std::static_pointer_cast<Core>(this->core()), write_, this->resource(), this->token(),
           sent_at() + ttl());
  }

  const bool write_;
};

// What both views share: validation, the acquire, the release channel.
class ViewBase : public Lock, protected ReleaseNotifier {
 public:
  ViewBase(std::shared_ptr<Core> core, bool write)
      : core_(std::move(core)), write_(write) {}

  const ReleaseNotifier* release_notifier() const override { return this; }

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override {
    absl::Status s = core_->CheckAcquire(resource, options.ttl);
    if (!s.ok()) return s;
    s = ValidateReplicaAck(core_->commands.replica_ack());
    if (!s.ok()) return s;
    if (core_->writer_intent_ttl < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("writer_intent_ttl must be >= 0");
    }
    return StartAcquire(std::make_shared<RwAcquireOp>(core_, write_, std::string(resource),
                                                      WholeMillis(options.ttl),
                                                      std::move(callback)),
                        [&](std::shared_ptr<RwAcquireOp> op) { return Send(std::move(op)); });
  }

 protected:
  std::string ReleaseChannel(absl::string_view resource) const override {
    return core_->keys().ChannelKey(resource);
  }
  Transport* ReleaseSubscriber() const override { return core_->transport; }

  std::shared_ptr<Core> core_;
  const bool write_;

 private:
  // Sends `op`'s acquire script (the writer's or the reader's).
  absl::Status Send(std::shared_ptr<RwAcquireOp> op) {
    const absl::string_view resource = op->resource();
    const KeyScheme& keys = core_->keys();
    std::vector<std::string> args = {
        op->token(), absl::StrCat(TtlMillis(op->ttl())),
        absl::StrCat(absl::ToInt64Milliseconds(core_->restart_window))};
    if (write_) {
      args.push_back(absl::StrCat(absl::ToInt64Milliseconds(core_->writer_intent_ttl)));
    }
    const Script& script = write_ ? WriteAcquireScript() : ReadAcquireScript();
    // A grant: the writer's fence (>= 1) or the reader's current fence (>= 0);
    // a refusal is nil or an array.
    bool (*const granted)(const Reply&) =
        write_ ? +[](const Reply& r) { return r.is_integer() && r.integer >= 1; }
               : +[](const Reply& r) { return r.is_integer() && r.integer >= 0; };
    return RunAcknowledged(
        script, *core_->transport,
        {keys.LockKey(resource), ReadersKey(keys, resource),
         WriterIntentKey(keys, resource), keys.DataSetKey(resource),
         keys.FenceHwmKey(resource)},
        std::move(args), core_->command_timeout, core_->commands.replica_ack(), granted,
        [op, keys, write = write_](absl::StatusOr<Reply> reply) {
          op->OnReply(AcquireReplyFence(keys, op->resource(), std::move(reply),
                                        write ? 1 : 0,
                                        write ? "the lock is held by a writer or readers"
                                              : "a writer holds or waits for the lock"));
        });
  }
};

}  // namespace

class ReadWriteLock::ReaderView : public ViewBase {
 public:
  explicit ReaderView(std::shared_ptr<Core> core) : ViewBase(std::move(core), false) {}

  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    absl::Status s = ValidateResourceToken(lease.resource, lease.token);
    if (!s.ok()) return s;
    return ReleaseAndReport(core_, "read", lease, std::move(callback), [&](auto on_notice) {
      return SendReadRelease(*core_, lease.resource, lease.token,
                             [on_notice = std::move(on_notice)](
                                 absl::StatusOr<Reply> reply) mutable {
                               std::move(on_notice)(ReleaseReplyNotice(std::move(reply)));
                             });
    });
  }

  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    absl::Status s = core_->CheckExtend(lease, ttl);
    if (!s.ok()) return s;
    return ExtendAndReport(
        core_, "read", lease, ttl, std::move(callback),
        [&](absl::Duration whole, auto on_status) {
          return RunAcknowledged(
              ReadExtendScript(), *core_->transport,
              {ReadersKey(core_->keys(), lease.resource)},
              {lease.token, absl::StrCat(TtlMillis(whole))}, core_->command_timeout,
              core_->commands.replica_ack(),
              [](const Reply& r) { return r.is_integer() && r.integer == 1; },
              [on_status = std::move(on_status)](absl::StatusOr<Reply> reply) mutable {
                std::move(on_status)(OwnedReplyStatus("extend", reply));
              });
        },
        AfterExtend{core_, false});
  }
};

class ReadWriteLock::WriterView : public ViewBase {
 public:
  explicit WriterView(std::shared_ptr<Core> core) : ViewBase(std::move(core), true) {}

  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return ReleaseAndReport(core_, "write", lease, std::move(callback), [&](auto on_notice) {
      return core_->commands.ReleaseNotifying(lease.resource, lease.token,
                                              core_->command_timeout, std::move(on_notice));
    });
  }

  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    absl::Status s = core_->CheckExtend(lease, ttl);
    if (!s.ok()) return s;
    return ExtendAndReport(
        core_, "write", lease, ttl, std::move(callback),
        [&](absl::Duration whole, auto on_status) {
          return core_->commands.Extend(lease.resource, lease.token, whole,
                                        core_->command_timeout, std::move(on_status));
        },
        AfterExtend{core_, true});
  }
};

ReadWriteLock::ReadWriteLock(EventLoop* loop, Transport* transport,
                             ReadWriteLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, options)),
      reader_(std::make_unique<ReaderView>(core_)),
      writer_(std::make_unique<WriterView>(core_)) {}

ReadWriteLock::~ReadWriteLock() { core_->retries.Stop(); }

Lock& ReadWriteLock::reader() { return *reader_; }
Lock& ReadWriteLock::writer() { return *writer_; }
const KeyScheme& ReadWriteLock::keys() const { return core_->keys(); }

}  // namespace dlock
