// FairLock, its Core (the waiter-channel subscription) and the one-try
// acquire. The wait in the queue: fair_wait.cc.
#include "dlock/lock/fair_lock.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/fair_lock_internal.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_release_extend.h"
#include "dlock/lock/single_server_acquire.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/tokens.h"

namespace dlock {

// Placed here rather than in the header: the minimum queue_ttl (a third of
// it is the refresh period, which must stay well above a loop tick).
constexpr absl::Duration kMinQueueTtl = absl::Milliseconds(30);

namespace {
absl::Status RefuseReplicaAck() {
  return absl::InvalidArgumentError(
      "FairLock does not support replica acknowledgement (replica_ack.min_replicas "
      "must be 0); use SimpleLock or the read-write lock's writer for acknowledged "
      "grants");
}
}  // namespace

FairLock::Core::Core(EventLoop* loop, Transport* transport,
                     const FairLockOptions& options)
    : LeaseCore(loop, options, ReplicaAckOptions(),
                options.replica_ack.min_replicas != 0 ? RefuseReplicaAck() : absl::OkStatus()),
      commands(transport, KeyScheme{options.key_prefix}),
      queue_ttl(WholeMillis(options.queue_ttl)),
      instance_id(NewToken()) {}


void FairLock::Core::EnsureSubscribed(const std::shared_ptr<Core>& core) {
  if (core->closed || core->subscription != nullptr || core->subscribing) return;
  core->subscribing = true;
  Core* raw = core.get();
  std::weak_ptr<Core> weak = core;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = core->commands.transport()->Subscribe(
      core->commands.WaiterChannel(core->instance_id),
      // Owned by the core and destroyed with it (or by ~FairLock), after
      // which this never runs again.
      [raw](absl::string_view, absl::string_view message) { raw->OnNotified(message); },
      [weak](absl::Status status) {
        std::shared_ptr<Core> core = weak.lock();
        if (core == nullptr) return;
        core->subscribing = false;
        if (!status.ok()) {
          // Kept until the core goes (not destroyed inside its own
          // callback); waiters rely on their refreshes.
          return;
        }
        core->subscribed = true;
        std::vector<std::shared_ptr<FairWait>> due;
        for (auto& [unused, w] : core->waits) due.push_back(w);
        for (const std::shared_ptr<FairWait>& w : due) w->OnSubscribed();
      });
  if (!sub.ok()) {
    core->subscribing = false;  // refreshes only; tried again by the next wait
    return;
  }
  core->subscription = std::move(*sub);
}

void FairLock::Core::OnNotified(absl::string_view waiter) {
  auto it = waits.find(waiter);
  if (it == waits.end()) return;  // ended meanwhile; its entry is gone or going
  std::shared_ptr<FairWait> w = it->second;
  w->OnWake();
}

void FairLock::Core::ReleaseInBackground(std::shared_ptr<Core> core, std::string resource,
                                         std::string token, std::string waiter,
                                         absl::Time expiry) {
  // RunCleanup keeps `core` alive whenever this sender runs.
  Core* c = core.get();
  RunReleaseCleanup(std::move(core), expiry,
                    [c, resource = std::move(resource), token = std::move(token),
                     waiter = std::move(waiter)](auto done) {
                      return c->commands.Release(resource, token, waiter, c->command_timeout,
                                                 std::move(done));
                    });
}

namespace {

// The one try (wait == 0): never queues.
class FairTryOp : public SingleServerAcquire {
 public:
  using SingleServerAcquire::SingleServerAcquire;

 private:
  void Undo() override {
    FairLock::Core::ReleaseInBackground(std::static_pointer_cast<FairLock::Core>(core()),
                                        resource(), token(), "", sent_at() + ttl());
  }
};

}  // namespace

FairLock::FairLock(EventLoop* loop, Transport* transport, FairLockOptions options)
    : core_(std::make_shared<Core>(loop, transport, options)) {}

FairLock::~FairLock() {
  core_->closed = true;
  std::vector<std::shared_ptr<FairWait>> all;
  for (auto& [unused, w] : core_->waits) all.push_back(w);
  for (const std::shared_ptr<FairWait>& w : all) w->Cancel();
  core_->retries.Stop();
  core_->subscription.reset();
}

int64_t FairLock::attempts() const { return core_->attempts; }
size_t FairLock::waiting() const { return core_->waits.size(); }
const std::string& FairLock::instance_id() const { return core_->instance_id; }

absl::StatusOr<AcquireHandle> FairLock::Acquire(absl::string_view resource,
                                                const AcquireOptions& options,
                                                LeaseCallback callback) {
  absl::Status s = core_->CheckAcquire(resource, options.ttl);
  if (!s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must not be negative");
  }
  if (options.wait > absl::ZeroDuration()) {
    if (core_->queue_ttl < kMinQueueTtl) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue_ttl must be at least ", absl::FormatDuration(kMinQueueTtl)));
    }
    auto w = std::make_shared<FairWait>(core_, std::string(resource),
                                        WholeMillis(options.ttl), options.wait,
                                        std::move(callback));
    s = w->Start();
    if (!s.ok()) return s;
    return AcquireHandle(std::weak_ptr<Cancellable>(w));
  }
  return StartAcquire(
      std::make_shared<FairTryOp>(core_, "fair", std::string(resource), NewToken(),
                                  WholeMillis(options.ttl), std::move(callback)),
      [this](std::shared_ptr<FairTryOp> op) {
        core_->attempts++;
        return core_->commands.Acquire(
            op->resource(), op->token(), "", op->ttl(), core_->restart_window,
            core_->queue_ttl, core_->command_timeout,
            [op](absl::StatusOr<FairAcquireReply> r) {
              if (!r.ok()) return op->OnReply(r.status());
              if (r->fence > 0) return op->OnReply(r->fence);
              op->OnReply(absl::AbortedError(
                  r->waiters > 0 ? absl::StrCat("lock is held or promised: ", r->waiters,
                                                " waiter(s) queued")
                                 : std::string("lock is held by another owner")));
            });
      });
}

absl::Status FairLock::Release(const Lease& lease, StatusCallback callback) {
  return ReleaseAndReport(core_, "fair", lease, std::move(callback), [&](ReleaseReport report) {
    return core_->commands.Release(lease.resource, lease.token, "", core_->command_timeout,
                                   std::move(report));
  });
}

absl::Status FairLock::Extend(const Lease& lease, absl::Duration ttl,
                              LeaseCallback callback) {
  return ExtendAndReport(core_, "fair", lease, ttl, std::move(callback),
                         [&](absl::Duration whole, ExtendReport report) {
                           LockCommands commands(core_->commands.transport(),
                                                 core_->commands.keys());
                           return commands.Extend(lease.resource, lease.token, whole,
                                                  core_->command_timeout,
                                                  std::move(report));
                         });
}

}  // namespace dlock
