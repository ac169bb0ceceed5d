#include "dlock/lock/reentrant_lock.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_ops.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/scripts.h"

namespace dlock {

struct ReentrantLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const ReentrantLockOptions& options)
      : LeaseCore(loop, options),
        transport(transport),
        keys{options.key_prefix, transport != nullptr && transport->cluster()},
        client_id(options.client_id.empty() ? NewToken() : options.client_id),
        replica_ack(options.replica_ack) {}

  std::string MarkerKey(absl::string_view resource, absl::string_view request) const {
    return absl::StrCat(keys.LockKey(resource), ":acquire:", request);
  }

  Transport* const transport;
  const KeyScheme keys;
  const std::string client_id;
  const ReplicaAckOptions replica_ack;
};

namespace {

// Runs `script` in the background, retried while it fails and `expiry`
// (when what it undoes expires by itself) is not reached (RunCleanup).
void RunScriptCleanup(std::shared_ptr<ReentrantLock::Core> core, absl::Time expiry,
                      const Script& script, std::vector<std::string> keys,
                      std::vector<std::string> args) {
  // RunCleanup keeps `core` alive whenever this sender runs.
  ReentrantLock::Core* c = core.get();
  RunCleanup(std::move(core), expiry,
             [c, &script, keys = std::move(keys),
              args = std::move(args)](absl::AnyInvocable<void(bool) &&> done) {
               return script.Run(*c->transport, keys, args, c->command_timeout,
                                 [done = std::move(done)](absl::StatusOr<Reply> reply) mutable {
                                   std::move(done)(!reply.ok());
                                 });
             });
}

// Undoes exactly the acquisition `request` (if it ran and is not undone),
// retried while its marker could still exist.
void UndoAcquisition(std::shared_ptr<ReentrantLock::Core> core, const std::string& resource,
                     const std::string& owner, const std::string& request,
                     absl::Time marker_expiry) {
  const ReentrantLock::Core& c = *core;
  RunScriptCleanup(std::move(core), marker_expiry, ReentrantUndoScript(),
                   {c.keys.LockKey(resource), c.MarkerKey(resource, request)},
                   {owner, c.keys.ChannelKey(resource)});
}

// Releases one hold of `owner` in the background, retried while the key
// could still exist: an extend whose acknowledgement fell short.
void GiveUpHold(std::shared_ptr<ReentrantLock::Core> core, const std::string& resource,
                const std::string& owner, absl::Time key_expiry) {
  const ReentrantLock::Core& c = *core;
  RunScriptCleanup(std::move(core), key_expiry, ReentrantReleaseScript(),
                   {c.keys.LockKey(resource)}, {owner, c.keys.ChannelKey(resource)});
}

class ReentrantAcquireOp : public SingleServerAcquire {
 public:
  ReentrantAcquireOp(std::shared_ptr<ReentrantLock::Core> core, std::string resource,
                     std::string owner, absl::Duration ttl, LeaseCallback callback)
      : SingleServerAcquire(core, "reentrant", std::move(resource), std::move(owner),
                            ttl, std::move(callback)),
        core_(std::move(core)),
        request_(NewToken()) {}

  absl::Status Send(std::shared_ptr<ReentrantAcquireOp> self) {
    const ReentrantLock::Core& c = *core_;
    const std::string& resource = this->resource();
    return RunAcknowledged(
        ReentrantAcquireScript(), *c.transport,
        {c.keys.LockKey(resource), c.MarkerKey(resource, request_), c.keys.DataSetKey(resource),
         c.keys.FenceHwmKey(resource)},
        {token(), absl::StrCat(TtlMillis(ttl())),
         absl::StrCat(absl::ToInt64Milliseconds(c.restart_window))},
        c.command_timeout, c.replica_ack,
        [](const Reply& r) { return r.is_array(); }, [self = std::move(self)](absl::StatusOr<Reply> reply) {
          self->OnReply(self->ParseFence(reply));
        });
  }

 private:
  // The reply as {count, fence}, kAborted, or an error.
  absl::StatusOr<int64_t> ParseFence(const absl::StatusOr<Reply>& reply) const {
    if (!reply.ok()) return reply.status();
    std::optional<absl::Status> refusal =
        AcquireRefusalStatus(core_->keys, resource(), *reply);
    if (refusal.has_value()) return *std::move(refusal);
    if (reply->is_nil()) return absl::AbortedError("lock is held by another owner");
    if (reply->is_array() && reply->elements.size() == 2 &&
        reply->elements[0].is_integer() && reply->elements[0].integer >= 1 &&
        reply->elements[1].is_integer() && reply->elements[1].integer >= 1) {
      return reply->elements[1].integer;
    }
    return UnexpectedReplyStatus("reentrant acquire", *reply);
  }

  void Undo() override {
    UndoAcquisition(core_, resource(), token(), request_, sent_at() + ttl());
  }

  // The same core as the base's, with its type.
  std::shared_ptr<ReentrantLock::Core> core_;
  std::string request_;
};

// The owner's reply to release/extend: holds nothing on the key.
absl::Status OwnerHoldsNothing() {
  return absl::FailedPreconditionError("the owner holds nothing on the key");
}

}  // namespace

ReentrantLock::ReentrantLock(EventLoop* loop, Transport* transport,
                             ReentrantLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, options)) {}

ReentrantLock::~ReentrantLock() { core_->retries.Stop(); }

const std::string& ReentrantLock::client_id() const { return core_->client_id; }

std::string ReentrantLock::ReleaseChannel(absl::string_view resource) const {
  return core_->keys.ChannelKey(resource);
}

Transport* ReentrantLock::ReleaseSubscriber() const { return core_->transport; }

std::string ReentrantLock::OwnerId(absl::string_view task_id) const {
  return absl::StrCat(core_->client_id, ":", task_id);
}

absl::StatusOr<AcquireHandle> ReentrantLock::Acquire(absl::string_view resource,
                                                     const AcquireOptions& options,
                                                     LeaseCallback callback) {
  absl::Status s = core_->CheckAcquire(resource, options.ttl);
  if (!s.ok()) return s;
  s = ValidateReplicaAck(core_->replica_ack);
  if (!s.ok()) return s;
  return StartAcquire(std::make_shared<ReentrantAcquireOp>(core_, std::string(resource),
                                                           OwnerId(options.task_id),
                                                           WholeMillis(options.ttl),
                                                           std::move(callback)),
                      [](std::shared_ptr<ReentrantAcquireOp> op) { return op->Send(op); });
}

absl::Status ReentrantLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateResourceToken(lease.resource, lease.token);
  if (!s.ok()) return s;
  const absl::Time sent_at = core_->loop->Now();
  return ReentrantReleaseScript().Run(
      *core_->transport, {core_->keys.LockKey(lease.resource)},
      {lease.token, core_->keys.ChannelKey(lease.resource)}, core_->command_timeout,
      [core = core_, resource = lease.resource, sent_at,
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        absl::Status status;
        std::string warning;
        if (!reply.ok()) {
          status = reply.status();
        } else if (reply->is_integer() && reply->integer >= 0) {
          status = absl::OkStatus();
        } else if (reply->is_string()) {
          // The last hold ended and the key is gone, but the PUBLISH was
          // refused (scripts.h).
          warning = UnpublishedReleaseWarning(reply->str);
        } else if (reply->is_integer() && reply->integer == -1) {
          status = OwnerHoldsNothing();
        } else {
          status = UnexpectedReplyStatus("reentrant release", *reply);
        }
        FinishRelease(*core, "reentrant", resource, sent_at, std::move(status), warning,
                      std::move(callback));
      });
}

absl::Status ReentrantLock::Extend(const Lease& lease, absl::Duration ttl,
                                   LeaseCallback callback) {
  absl::Status s = core_->CheckExtend(lease, ttl);
  if (!s.ok()) return s;
  s = ValidateReplicaAck(core_->replica_ack);
  if (!s.ok()) return s;
  return ExtendAndReport(
      core_, "reentrant", lease, ttl, std::move(callback),
      [&](absl::Duration whole, auto on_status) {
        return RunAcknowledged(
            ReentrantExtendScript(), *core_->transport, {core_->keys.LockKey(lease.resource)},
            {lease.token, absl::StrCat(TtlMillis(whole))}, core_->command_timeout,
            core_->replica_ack, [](const Reply& r) { return r.is_integer() && r.integer == 1; },
            [on_status = std::move(on_status)](absl::StatusOr<Reply> reply) mutable {
              absl::Status status;
              if (!reply.ok()) {
                status = reply.status();
              } else if (reply->is_integer() && reply->integer == 1) {
                status = absl::OkStatus();
              } else if (reply->is_integer() && reply->integer == 0) {
                status = OwnerHoldsNothing();
              } else {
                status = UnexpectedReplyStatus("reentrant extend", *reply);
              }
              std::move(on_status)(std::move(status));
            });
      },
      [core = core_](absl::Status status, const Lease& lease, absl::Time key_expiry) {
        // Give this hold up (one release), as an undone acquisition would.
        return GiveUpOnShortfall(std::move(status), "this hold", [&] {
          GiveUpHold(core, lease.resource, lease.token, key_expiry);
        });
      });
}

}  // namespace dlock
