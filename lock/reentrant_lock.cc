#include "dlock/lock/reentrant_lock.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lease_release_extend.h"
#include "dlock/lock/single_server_acquire.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/scripts.h"

namespace dlock {

struct ReentrantLock::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const ReentrantLockOptions& options)
      : LeaseCore(loop, options, options.replica_ack),
        transport(transport),
        keys{options.key_prefix, transport != nullptr && transport->cluster()},
        client_id(options.client_id.empty() ? NewToken() : options.client_id) {}

  std::string MarkerKey(absl::string_view resource, absl::string_view request) const {
    return absl::StrCat(keys.LockKey(resource), ":acquire:", request);
  }

  Transport* const transport;
  const KeyScheme keys;
  const std::string client_id;
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

// GiveUpHold as ExtendAndReport calls it (GiveUpFn).
void GiveUpHoldOf(const std::shared_ptr<LeaseCore>& core, const std::string& resource,
                  const std::string& owner, absl::Time key_expiry) {
  GiveUpHold(std::static_pointer_cast<ReentrantLock::Core>(core), resource, owner, key_expiry);
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
    const std::string keys[] = {c.keys.LockKey(resource), c.MarkerKey(resource, request_),
                                c.keys.DataSetKey(resource), c.keys.FenceHwmKey(resource)};
    const std::string args[] = {token(), absl::StrCat(TtlMillis(ttl())),
                                absl::StrCat(absl::ToInt64Milliseconds(c.restart_window))};
    const absl::string_view key_views[] = {keys[0], keys[1], keys[2], keys[3]};
    const absl::string_view arg_views[] = {args[0], args[1], args[2]};
    return MakeLeaseCommand(ReentrantAcquireScript(), key_views, arg_views,
                            ReentrantFenceReply{}, c.replica_ack)
        .Send(*c.transport, c.command_timeout,
              [self = std::move(self)](absl::StatusOr<int64_t> fence) {
                self->OnReply(std::move(fence));
              });
  }

 private:
  // The reply as {count, fence}, kAborted, or an error.
  struct ReentrantFenceReply {
    using Output = absl::StatusOr<int64_t>;
    Output operator()(absl::StatusOr<Reply> reply,
                      absl::Span<const absl::string_view> keys) const {
      std::optional<absl::Status> not_granted = AcquireNonGrant(
          reply, keys, AcquireKeySlots{0, 3, 2}, "lock is held by another owner");  // KEYS: lock, marker, data-set, mark
      if (not_granted.has_value()) return *std::move(not_granted);
      if (reply->is_array() && reply->elements.size() == 2 &&
          reply->elements[0].is_integer() && reply->elements[0].integer >= 1 &&
          reply->elements[1].is_integer() && reply->elements[1].integer >= 1) {
        return reply->elements[1].integer;
      }
      return UnexpectedReplyStatus("reentrant acquire", *reply);
    }
    WroteRule wrote() const { return WroteRule::Array(); }
  };

  void Undo() override {
    UndoAcquisition(core_, resource(), token(), request_, sent_at() + ttl());
  }

  // The same core as the base's, with its type.
  std::shared_ptr<ReentrantLock::Core> core_;
  std::string request_;
};

// The owner's reply to release/extend: holds nothing on the key.
constexpr char kOwnerHoldsNothing[] = "the owner holds nothing on the key";

// The release's reply: the holds left (>= 0), -1 (the owner holds nothing),
// or a string (the last hold ended and the key is gone, but the PUBLISH was
// refused: scripts.h).
struct ReentrantReleaseReply {
  using Output = absl::StatusOr<ReleaseNotice>;
  Output operator()(absl::StatusOr<Reply> reply, absl::Span<const absl::string_view>) const {
    if (!reply.ok()) return reply.status();
    if (reply->is_integer() && reply->integer >= 0) return ReleaseNotice();
    if (reply->is_string()) {
      ReleaseNotice notice;
      notice.published = false;
      notice.publish_error = std::move(reply->str);
      return notice;
    }
    if (reply->is_integer() && reply->integer == -1) {
      return absl::FailedPreconditionError(kOwnerHoldsNothing);
    }
    return UnexpectedReplyStatus("reentrant release", *reply);
  }
  WroteRule wrote() const { return WroteRule::Never(); }
};

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
  return StartAcquire(std::make_shared<ReentrantAcquireOp>(core_, std::string(resource),
                                                           OwnerId(options.task_id),
                                                           WholeMillis(options.ttl),
                                                           std::move(callback)),
                      [](std::shared_ptr<ReentrantAcquireOp> op) { return op->Send(op); });
}

absl::Status ReentrantLock::CheckAcquireArgs(absl::string_view resource,
                                             const AcquireOptions& options) const {
  return core_->CheckAcquire(resource, options.ttl);
}

absl::Status ReentrantLock::Release(const Lease& lease, StatusCallback callback) {
  auto send = [&](ReleaseReport report) {
    const std::string keys[] = {core_->keys.LockKey(lease.resource),
                                core_->keys.ChannelKey(lease.resource)};
    const absl::string_view key_views[] = {keys[0]};
    const absl::string_view arg_views[] = {lease.token, keys[1]};
    return MakeLeaseCommand(ReentrantReleaseScript(), key_views, arg_views,
                            ReentrantReleaseReply{})
        .Send(*core_->transport, core_->command_timeout, std::move(report));
  };
  return ReleaseAndReport(core_, "reentrant", lease, std::move(callback), send);
}

absl::Status ReentrantLock::Extend(const Lease& lease, absl::Duration ttl,
                                   LeaseCallback callback) {
  return ExtendAndReport(
      core_, "reentrant", lease, ttl, std::move(callback),
      [&](absl::Duration whole, ExtendReport report) {
        const std::string lock_key = core_->keys.LockKey(lease.resource);
        const std::string ttl_ms = absl::StrCat(TtlMillis(whole));
        const absl::string_view key_views[] = {lock_key};
        const absl::string_view arg_views[] = {lease.token, ttl_ms};
        return MakeLeaseCommand(ReentrantExtendScript(), key_views, arg_views,
                                OwnedReply{"reentrant extend", kOwnerHoldsNothing},
                                core_->replica_ack)
            .Send(*core_->transport, core_->command_timeout, std::move(report));
      },
      // A shortfall gives this hold up (one release), as an undone
      // acquisition would.
      GiveUpHoldOf, "this hold");
}

}  // namespace dlock
