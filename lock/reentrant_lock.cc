#include "dlock/lock/reentrant_lock.h"

#include <memory>
#include <optional>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/lease_ops.h"
#include "dlock/lock/reply_status.h"

namespace dlock {

struct ReentrantLock::Core {
  Core(EventLoop* loop, Transport* transport, ReentrantLockOptions opts)
      : loop(loop),
        transport(transport),
        options(std::move(opts)),
        keys{options.key_prefix},
        client_id(options.client_id.empty() ? NewToken() : options.client_id),
        observer(ObserverOrNoop(options.observer)) {}

  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, options.drift_factor, options.drift_constant);
  }

  absl::Status ValidateLeaseTtl(absl::Duration ttl) const {
    return dlock::ValidateLeaseTtl(ttl, kMaxTtl, options.drift_factor,
                                   options.drift_constant);
  }

  std::string MarkerKey(absl::string_view resource, absl::string_view request) const {
    return absl::StrCat(keys.LockKey(resource), ":acquire:", request);
  }

  EventLoop* loop;
  // Cleanups after unknown outcomes; each callback holds the Core. After
  // `loop`, which it is built from.
  BackgroundRetries retries{loop};
  Transport* transport;
  ReentrantLockOptions options;
  KeyScheme keys;
  std::string client_id;
  LockObserver* observer;
};

namespace {

constexpr int kUndoAttempts = 3;
constexpr absl::Duration kUndoRetryDelay = absl::Milliseconds(100);

// Undoes exactly the acquisition `request` (if it ran and is not undone).
void Undo(std::shared_ptr<ReentrantLock::Core> core, std::string resource,
          std::string owner, std::string request, absl::Time marker_expiry,
          int attempts_left) {
  ReentrantLock::Core* c = core.get();
  absl::Status s = ReentrantUndoScript().Run(
      *c->transport, {c->keys.LockKey(resource), c->MarkerKey(resource, request)},
      {owner, c->keys.ChannelKey(resource)}, c->options.command_timeout,
      [core = std::move(core), resource, owner, request, marker_expiry,
       attempts_left](absl::StatusOr<Reply> reply) mutable {
        if (reply.ok() || attempts_left <= 1) return;
        EventLoop* loop = core->loop;
        auto* core_raw = core.get();
        if (loop->Now() + kUndoRetryDelay >= marker_expiry) return;
        core_raw->retries.RunLater(kUndoRetryDelay, [core = std::move(core),
                                         resource = std::move(resource),
                                         owner = std::move(owner),
                                         request = std::move(request), marker_expiry,
                                         attempts_left]() mutable {
          Undo(std::move(core), std::move(resource), std::move(owner),
               std::move(request), marker_expiry, attempts_left - 1);
        });
      });
  (void)s;  // transport closed: the marker and the count expire by TTL
}

class ReentrantAcquireOp : public Cancellable {
 public:
  ReentrantAcquireOp(std::shared_ptr<ReentrantLock::Core> core, std::string resource,
                     std::string owner, absl::Duration ttl, absl::Time sent_at,
                     LeaseCallback callback)
      : core_(std::move(core)),
        resource_(std::move(resource)),
        owner_(std::move(owner)),
        request_(NewToken()),
        ttl_(ttl),
        sent_at_(sent_at),
        callback_(std::move(callback)) {}

  absl::Status Send(std::shared_ptr<ReentrantAcquireOp> self) {
    ReentrantLock::Core* c = core_.get();
    return ReentrantAcquireScript().Run(
        *c->transport,
        {c->keys.LockKey(resource_), c->keys.FenceKey(resource_),
         c->MarkerKey(resource_, request_), c->keys.DataSetKey()},
        {owner_, absl::StrCat(TtlMillis(ttl_)),
         absl::StrCat(absl::ToInt64Milliseconds(c->options.restart_window))},
        c->options.command_timeout,
        [self = std::move(self)](absl::StatusOr<Reply> reply) {
          self->OnReply(std::move(reply));
        });
  }

  bool Cancel() override {
    if (state_ != State::kPending) return false;
    state_ = State::kCancelled;
    LeaseCallback dropped = std::move(callback_);
    (void)dropped;
    return true;
  }

 private:
  enum class State { kPending, kCancelled, kDone };

  // The reply as {count, fence}, kAborted, or an error.
  absl::StatusOr<int64_t> ParseFence(const absl::StatusOr<Reply>& reply) const {
    if (!reply.ok()) return reply.status();
    std::optional<absl::Status> refusal =
        AcquireRefusalStatus(core_->keys, resource_, *reply);
    if (refusal.has_value()) return *std::move(refusal);
    if (reply->is_nil()) return absl::AbortedError("lock is held by another owner");
    if (reply->is_array() && reply->elements.size() == 2 &&
        reply->elements[0].is_integer() && reply->elements[0].integer >= 1 &&
        reply->elements[1].is_integer() && reply->elements[1].integer >= 1) {
      return reply->elements[1].integer;
    }
    return UnexpectedReplyStatus("reentrant acquire", *reply);
  }

  void OnReply(absl::StatusOr<Reply> reply) {
    const absl::Time now = core_->loop->Now();
    const absl::Time deadline = sent_at_ + ttl_ - core_->Drift(ttl_);
    absl::StatusOr<int64_t> fence = ParseFence(reply);
    if (state_ == State::kCancelled) {
      if (!absl::IsAborted(fence.status())) UndoThis();
      return;
    }
    state_ = State::kDone;
    absl::StatusOr<Lease> result = FinishAcquire(
        {"reentrant", resource_, owner_, ttl_, sent_at_, deadline}, std::move(fence), now,
        core_->observer, [this] { UndoThis(); });
    LeaseCallback cb = std::move(callback_);
    std::move(cb)(std::move(result));
  }

  void UndoThis() {
    Undo(core_, resource_, owner_, request_, sent_at_ + ttl_, kUndoAttempts);
  }

  std::shared_ptr<ReentrantLock::Core> core_;
  std::string resource_;
  std::string owner_;
  std::string request_;
  absl::Duration ttl_;
  absl::Time sent_at_;
  LeaseCallback callback_;
  State state_ = State::kPending;
};

}  // namespace

ReentrantLock::ReentrantLock(EventLoop* loop, Transport* transport,
                             ReentrantLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, std::move(options))) {}

ReentrantLock::~ReentrantLock() { core_->retries.Stop(); }

const std::string& ReentrantLock::client_id() const { return core_->client_id; }

std::string ReentrantLock::OwnerId(absl::string_view task_id) const {
  return absl::StrCat(core_->client_id, ":", task_id);
}

absl::StatusOr<AcquireHandle> ReentrantLock::Acquire(absl::string_view resource,
                                                     const AcquireOptions& options,
                                                     LeaseCallback callback) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = core_->ValidateLeaseTtl(options.ttl);
  if (!s.ok()) return s;
  if (core_->options.restart_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("restart_window must be >= 0");
  }
  auto op = std::make_shared<ReentrantAcquireOp>(
      core_, std::string(resource), OwnerId(options.task_id),
      WholeMillis(options.ttl), core_->loop->Now(), std::move(callback));
  std::weak_ptr<Cancellable> weak = op;
  s = op->Send(op);
  if (!s.ok()) return s;
  return AcquireHandle(weak);
}

absl::Status ReentrantLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  if (lease.token.empty()) return absl::InvalidArgumentError("lease has no owner");
  const absl::Time sent_at = core_->loop->Now();
  return ReentrantReleaseScript().Run(
      *core_->transport, {core_->keys.LockKey(lease.resource)},
      {lease.token, core_->keys.ChannelKey(lease.resource)},
      core_->options.command_timeout,
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
          status = absl::OkStatus();
          warning = UnpublishedReleaseWarning(reply->str);
        } else if (reply->is_integer() && reply->integer == -1) {
          status = absl::FailedPreconditionError("the owner holds nothing on the key");
        } else {
          status = UnexpectedReplyStatus("reentrant release", *reply);
        }
        ReleaseEvent event;
        event.policy = "reentrant";
        event.resource = resource;
        event.status = status;
        event.latency = core->loop->Now() - sent_at;
        event.warning = warning;
        core->observer->OnRelease(event);
        std::move(callback)(std::move(status));
      });
}

absl::Status ReentrantLock::Extend(const Lease& lease, absl::Duration ttl,
                                   LeaseCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  if (lease.token.empty()) return absl::InvalidArgumentError("lease has no owner");
  s = core_->ValidateLeaseTtl(ttl);
  if (!s.ok()) return s;
  const absl::Duration whole = WholeMillis(ttl);
  const absl::Time sent_at = core_->loop->Now();
  return ReentrantExtendScript().Run(
      *core_->transport, {core_->keys.LockKey(lease.resource)},
      {lease.token, absl::StrCat(TtlMillis(whole))}, core_->options.command_timeout,
      [core = core_, lease = Lease(lease), whole, sent_at,
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        absl::Status status;
        if (!reply.ok()) {
          status = reply.status();
        } else if (reply->is_integer() && reply->integer == 1) {
          status = absl::OkStatus();
        } else if (reply->is_integer() && reply->integer == 0) {
          status = absl::FailedPreconditionError("the owner holds nothing on the key");
        } else {
          status = UnexpectedReplyStatus("reentrant extend", *reply);
        }
        ExtendEvent event;
        event.policy = "reentrant";
        event.resource = lease.resource;
        event.status = status;
        event.latency = core->loop->Now() - sent_at;
        event.ttl = whole;
        core->observer->OnExtend(event);
        if (!status.ok()) {
          std::move(callback)(std::move(status));
          return;
        }
        lease.ttl = whole;
        lease.deadline = sent_at + whole - core->Drift(whole);
        std::move(callback)(std::move(lease));
      });
}

}  // namespace dlock
