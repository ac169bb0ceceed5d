#include "dlock/lock/read_write_lock.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lease_release_extend.h"
#include "dlock/lock/single_server_acquire.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/tokens.h"
#include "dlock/lock/write_acquire_tx.h"
#include "dlock/transport/reply.h"

namespace dlock {

struct ReadWriteLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const ReadWriteLockOptions& options)
      : LeaseCore(loop, options, options.replica_ack, absl::OkStatus(),
                  options.writer_intent_ttl < absl::ZeroDuration()
                      ? absl::InvalidArgumentError("writer_intent_ttl must be >= 0")
                      : absl::OkStatus()),
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
template <typename F>  // void(absl::StatusOr<ReleaseNotice>) &&
absl::Status SendReadRelease(const Core& core, absl::string_view resource,
                             absl::string_view token, F cb) {
  const std::string readers = ReadersKey(core.keys(), resource);
  const std::string channel = core.keys().ChannelKey(resource);
  const absl::string_view key_views[] = {readers};
  const absl::string_view arg_views[] = {token, channel};
  return MakeLeaseCommand(ReadReleaseScript(), key_views, arg_views, ReleaseNoticeReply{})
      .Send(*core.transport, core.command_timeout, std::move(cb));
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
                        return c->commands.ReleaseNotifying(resource, token,
                                                            c->command_timeout, std::move(done));
                      }
                      return SendReadRelease(*c, resource, token, std::move(done));
                    });
}

// GiveUp as ExtendAndReport calls it (GiveUpFn) after a reader's / writer's
// extend that too few replicas acknowledged: the lease is given up.
void GiveUpRead(const std::shared_ptr<LeaseCore>& core, const std::string& resource,
                const std::string& token, absl::Time key_expiry) {
  GiveUp(std::static_pointer_cast<Core>(core), false, resource, token, key_expiry);
}
void GiveUpWrite(const std::shared_ptr<LeaseCore>& core, const std::string& resource,
                 const std::string& token, absl::Time key_expiry) {
  GiveUp(std::static_pointer_cast<Core>(core), true, resource, token, key_expiry);
}

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
    const std::string key_list[] = {keys.LockKey(resource), ReadersKey(keys, resource),
                                    WriterIntentKey(keys, resource),
                                    keys.DataSetKey(resource), keys.FenceHwmKey(resource)};
    const std::string args[] = {
        op->token(), absl::StrCat(TtlMillis(op->ttl())),
        absl::StrCat(absl::ToInt64Milliseconds(core_->restart_window)),
        absl::StrCat(absl::ToInt64Milliseconds(core_->writer_intent_ttl))};
    const absl::string_view key_views[] = {key_list[0], key_list[1], key_list[2],
                                           key_list[3], key_list[4]};
    // The writer's script takes the intent's ttl too.
    const absl::string_view arg_views[] = {args[0], args[1], args[2], args[3]};
    const Script& script = write_ ? WriteAcquireScript() : ReadAcquireScript();
    // A grant: the writer's fence (>= 1) or the reader's current fence (>= 0);
    // a refusal is nil or an array.
    FenceReply parse;
    parse.min_fence = write_ ? 1 : 0;
    parse.held = write_ ? "the lock is held by a writer or readers"
                        : "a writer holds or waits for the lock";
    parse.slots = AcquireKeySlots{0, 4, 3};  // KEYS: lock, readers, intent, data-set, mark
    if (write_ && core_->replica_ack.min_replicas == 0) {
      // One MULTI/EXEC on the common path (write_acquire_tx.h); the script
      // on a cluster and with replica acknowledgement.
      return SendWriteAcquireTx(
          *core_->transport, key_views, arg_views, core_->command_timeout,
          [parse, reply = AcquireReply{op}](absl::StatusOr<Reply> r,
                                            absl::Span<const absl::string_view> keys) mutable {
            reply(parse(std::move(r), keys));
          });
    }
    return MakeLeaseCommand(script, key_views,
                            absl::MakeConstSpan(arg_views, write_ ? 4 : 3), parse,
                            core_->replica_ack)
        .Send(*core_->transport, core_->command_timeout, AcquireReply{op});
  }
};

}  // namespace

class ReadWriteLock::ReaderView : public ViewBase {
 public:
  explicit ReaderView(std::shared_ptr<Core> core) : ViewBase(std::move(core), false) {}

  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return ReleaseAndReport(core_, "read", lease, std::move(callback), [&](ReleaseReport report) {
      return SendReadRelease(*core_, lease.resource, lease.token, std::move(report));
    });
  }

  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    return ExtendAndReport(
        core_, "read", lease, ttl, std::move(callback),
        [&](absl::Duration whole, ExtendReport report) {
          const std::string readers = ReadersKey(core_->keys(), lease.resource);
          const std::string ttl_ms = absl::StrCat(TtlMillis(whole));
          const absl::string_view key_views[] = {readers};
          const absl::string_view arg_views[] = {lease.token, ttl_ms};
          return MakeLeaseCommand(ReadExtendScript(), key_views, arg_views, OwnedReply{},
                                  core_->replica_ack)
              .Send(*core_->transport, core_->command_timeout, std::move(report));
        },
        GiveUpRead);
  }
};

class ReadWriteLock::WriterView : public ViewBase {
 public:
  explicit WriterView(std::shared_ptr<Core> core) : ViewBase(std::move(core), true) {}

  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return ReleaseAndReport(core_, "write", lease, std::move(callback), [&](ReleaseReport report) {
      LeaseArgv a;
      return core_->commands.ReleaseCommand(lease.resource, lease.token, a)
          .Send(*core_->transport, core_->command_timeout, std::move(report));
    });
  }

  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override {
    return ExtendAndReport(
        core_, "write", lease, ttl, std::move(callback),
        [&](absl::Duration whole, ExtendReport report) {
          LeaseArgv a;
          return core_->commands.ExtendCommand(lease.resource, lease.token, whole, a)
              .Send(*core_->transport, core_->command_timeout, std::move(report));
        },
        GiveUpWrite);
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
