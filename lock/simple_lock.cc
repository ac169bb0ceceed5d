#include "dlock/lock/simple_lock.h"

#include <memory>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_ops.h"

namespace dlock {

struct SimpleLock::Core {
  Core(EventLoop* loop, Transport* transport, SimpleLockOptions options)
      : loop(loop),
        commands(transport, KeyScheme{options.key_prefix}),
        options(std::move(options)),
        observer(ObserverOrNoop(this->options.observer)) {}

  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, options.drift_factor, options.drift_constant);
  }

  absl::Status ValidateLeaseTtl(absl::Duration ttl) const {
    return dlock::ValidateLeaseTtl(ttl, kMaxTtl, options.drift_factor,
                                   options.drift_constant);
  }

  EventLoop* loop;
  // Cleanups after unknown outcomes; each callback holds the Core. After
  // `loop`, which it is built from.
  BackgroundRetries retries{loop};
  LockCommands commands;
  SimpleLockOptions options;
  LockObserver* observer;
};

namespace {

constexpr int kCleanupAttempts = 3;
constexpr absl::Duration kCleanupRetryDelay = absl::Milliseconds(100);

// Releases `token` after an acquire whose outcome is unknown or unwanted.
// Retries transport failures while the key could still exist (until
// `key_expiry`, the latest time the server key can live).
void CleanupToken(std::shared_ptr<SimpleLock::Core> core, std::string resource,
                  std::string token, absl::Time key_expiry, int attempts_left) {
  SimpleLock::Core* c = core.get();
  absl::Status s = c->commands.Release(
      resource, token, c->options.command_timeout,
      [core = std::move(core), resource, token, key_expiry,
       attempts_left](absl::Status status) mutable {
        const bool unknown = absl::IsUnavailable(status) ||
                             absl::IsDeadlineExceeded(status);
        if (!unknown || attempts_left <= 1) return;
        EventLoop* loop = core->loop;
        auto* core_raw = core.get();
        if (loop->Now() + kCleanupRetryDelay >= key_expiry) return;
        core_raw->retries.RunLater(kCleanupRetryDelay, [core = std::move(core),
                                            resource = std::move(resource),
                                            token = std::move(token), key_expiry,
                                            attempts_left]() mutable {
          CleanupToken(std::move(core), std::move(resource), std::move(token),
                       key_expiry, attempts_left - 1);
        });
      });
  // A rejected send (transport closed): nothing more we can do; the key
  // expires by its TTL.
  (void)s;
}

class AcquireOp : public Cancellable {
 public:
  AcquireOp(std::shared_ptr<SimpleLock::Core> core, std::string resource,
            std::string token, absl::Duration ttl, absl::Time sent_at,
            LeaseCallback callback)
      : core_(std::move(core)),
        resource_(std::move(resource)),
        token_(std::move(token)),
        ttl_(ttl),
        sent_at_(sent_at),
        callback_(std::move(callback)) {}

  const std::string& token() const { return token_; }

  bool Cancel() override {
    if (state_ != State::kPending) return false;
    state_ = State::kCancelled;
    LeaseCallback dropped = std::move(callback_);
    (void)dropped;  // destroyed here, before Cancel returns
    return true;
  }

  void OnReply(absl::StatusOr<int64_t> fence) {
    const absl::Time now = core_->loop->Now();
    const absl::Time deadline = sent_at_ + ttl_ - core_->Drift(ttl_);
    if (state_ == State::kCancelled) {
      // Nobody wants the lock any more; give back whatever we may hold.
      if (!absl::IsAborted(fence.status())) Cleanup();
      return;
    }
    state_ = State::kDone;
    absl::StatusOr<Lease> result = FinishAcquire(
        {"simple", resource_, token_, ttl_, sent_at_, deadline}, std::move(fence), now,
        core_->observer, [this] { Cleanup(); });
    LeaseCallback cb = std::move(callback_);
    std::move(cb)(std::move(result));
  }

 private:
  enum class State { kPending, kCancelled, kDone };

  void Cleanup() {
    CleanupToken(core_, resource_, token_, sent_at_ + ttl_, kCleanupAttempts);
  }

  std::shared_ptr<SimpleLock::Core> core_;
  std::string resource_;
  std::string token_;
  absl::Duration ttl_;
  absl::Time sent_at_;
  LeaseCallback callback_;
  State state_ = State::kPending;
};

}  // namespace

SimpleLock::SimpleLock(EventLoop* loop, Transport* transport,
                       SimpleLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, std::move(options))) {}

SimpleLock::~SimpleLock() { core_->retries.Stop(); }

const KeyScheme& SimpleLock::keys() const { return core_->commands.keys(); }

absl::StatusOr<AcquireHandle> SimpleLock::Acquire(absl::string_view resource,
                                                  const AcquireOptions& options,
                                                  LeaseCallback callback) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = core_->ValidateLeaseTtl(options.ttl);
  if (!s.ok()) return s;
  const absl::Duration ttl = WholeMillis(options.ttl);
  auto op = std::make_shared<AcquireOp>(core_, std::string(resource), NewToken(),
                                        ttl, core_->loop->Now(),
                                        std::move(callback));
  std::weak_ptr<Cancellable> weak = op;
  s = core_->commands.TryAcquire(
      resource, op->token(), ttl, core_->options.restart_window,
      core_->options.command_timeout,
      [op](absl::StatusOr<int64_t> fence) { op->OnReply(std::move(fence)); });
  if (!s.ok()) return s;
  return AcquireHandle(weak);
}

absl::Status SimpleLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  const absl::Time sent_at = core_->loop->Now();
  return core_->commands.ReleaseNotifying(
      lease.resource, lease.token, core_->options.command_timeout,
      [core = core_, resource = lease.resource, sent_at,
       callback = std::move(callback)](absl::StatusOr<ReleaseNotice> notice) mutable {
        absl::Status status = notice.status();
        std::string warning;
        if (notice.ok() && !notice->published) {
          warning = UnpublishedReleaseWarning(notice->publish_error);
        }
        ReleaseEvent event;
        event.policy = "simple";
        event.resource = resource;
        event.status = status;
        event.latency = core->loop->Now() - sent_at;
        event.warning = warning;
        core->observer->OnRelease(event);
        std::move(callback)(std::move(status));
      });
}

absl::Status SimpleLock::Extend(const Lease& lease, absl::Duration ttl,
                                LeaseCallback callback) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  s = core_->ValidateLeaseTtl(ttl);
  if (!s.ok()) return s;
  const absl::Duration whole = WholeMillis(ttl);
  const absl::Time sent_at = core_->loop->Now();
  return core_->commands.Extend(
      lease.resource, lease.token, whole, core_->options.command_timeout,
      [core = core_, lease = Lease(lease), whole, sent_at,
       callback = std::move(callback)](absl::Status status) mutable {
        ExtendEvent event;
        event.policy = "simple";
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
