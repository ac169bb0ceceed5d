#include "dlock/lock/semaphore.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_core.h"
#include "dlock/lock/lease_release_extend.h"
#include "dlock/lock/single_server_acquire.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/lock/tokens.h"

namespace dlock {
namespace {

absl::Status ValidatePermits(int64_t permits) {
  if (permits < 1 || permits > kMaxPermits) {
    return absl::InvalidArgumentError(
        absl::StrCat("permits ", permits, " is outside [1, ", kMaxPermits, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

struct Semaphore::Core : LeaseCore {
  Core(EventLoop* loop, Transport* transport, const SemaphoreOptions& options)
      : LeaseCore(loop, options, ReplicaAckOptions(), absl::OkStatus(),
                  ValidatePermits(options.permits)),
        transport(transport),
        keys{options.key_prefix, transport != nullptr && transport->cluster()},
        permits(options.permits) {}

  // SemaphoreReleaseScript for `token`: its reply as for a lock's release.
  template <typename F>  // void(absl::StatusOr<ReleaseNotice>) &&
  absl::Status SendRelease(absl::string_view resource, absl::string_view token, F cb) {
    const std::string lock_key = keys.LockKey(resource);
    const std::string channel = keys.ChannelKey(resource);
    const absl::string_view key_views[] = {lock_key};
    const absl::string_view arg_views[] = {token, channel};
    return MakeLeaseCommand(SemaphoreReleaseScript(), key_views, arg_views,
                            ReleaseNoticeReply{})
        .Send(*transport, command_timeout, std::move(cb));
  }

  Transport* const transport;
  const KeyScheme keys;
  const int64_t permits;
};

namespace {

constexpr char kPolicy[] = "semaphore";

// Gives back a permit after an acquire whose outcome is unknown or
// unwanted, retried while it could still be live (RunCleanup).
void CleanupPermit(std::shared_ptr<Semaphore::Core> core, std::string resource,
                   std::string token, absl::Time expiry) {
  // RunCleanup keeps `core` alive whenever this sender runs.
  Semaphore::Core* c = core.get();
  RunReleaseCleanup(std::move(core), expiry,
                    [c, resource = std::move(resource), token = std::move(token)](auto done) {
                      return c->SendRelease(resource, token, std::move(done));
                    });
}

class SemaphoreAcquireOp : public SingleServerAcquire {
 public:
  SemaphoreAcquireOp(std::shared_ptr<Semaphore::Core> core, std::string resource,
                     absl::Duration ttl, LeaseCallback callback)
      : SingleServerAcquire(core, kPolicy, std::move(resource), NewToken(), ttl,
                            std::move(callback)),
        core_(std::move(core)) {}

  absl::Status Send(std::shared_ptr<SemaphoreAcquireOp> self) {
    const Semaphore::Core& c = *core_;
    const std::string keys[] = {c.keys.LockKey(resource()), c.keys.DataSetKey(resource()),
                                c.keys.FenceHwmKey(resource())};
    const std::string args[] = {token(), absl::StrCat(TtlMillis(ttl())),
                                absl::StrCat(absl::ToInt64Milliseconds(c.restart_window)),
                                absl::StrCat(c.permits)};
    const absl::string_view key_views[] = {keys[0], keys[1], keys[2]};
    const absl::string_view arg_views[] = {args[0], args[1], args[2], args[3]};
    return MakeLeaseCommand(SemaphoreAcquireScript(), key_views, arg_views, FenceReply{})
        .Send(*c.transport, c.command_timeout, [self = std::move(self)](
                                                   absl::StatusOr<int64_t> fence) {
          if (absl::IsAborted(fence.status())) {
            fence = absl::AbortedError(
                absl::StrCat("all ", self->core_->permits, " permits are held"));
          }
          self->OnReply(std::move(fence));
        });
  }

 private:
  void Undo() override { CleanupPermit(core_, resource(), token(), sent_at() + ttl()); }

  // The same core as the base's, with its type.
  std::shared_ptr<Semaphore::Core> core_;
};

}  // namespace

Semaphore::Semaphore(EventLoop* loop, Transport* transport, SemaphoreOptions options)
    : core_(std::make_shared<Core>(loop, transport, options)) {}

Semaphore::~Semaphore() { core_->retries.Stop(); }

int64_t Semaphore::permits() const { return core_->permits; }

const KeyScheme& Semaphore::keys() const { return core_->keys; }

std::string Semaphore::ReleaseChannel(absl::string_view resource) const {
  return core_->keys.ChannelKey(resource);
}

Transport* Semaphore::ReleaseSubscriber() const { return core_->transport; }

absl::StatusOr<AcquireHandle> Semaphore::Acquire(absl::string_view resource,
                                                 const AcquireOptions& options,
                                                 LeaseCallback callback) {
  absl::Status s = core_->CheckAcquire(resource, options.ttl);
  if (!s.ok()) return s;
  return StartAcquire(std::make_shared<SemaphoreAcquireOp>(core_, std::string(resource),
                                                           WholeMillis(options.ttl),
                                                           std::move(callback)),
                      [](std::shared_ptr<SemaphoreAcquireOp> op) { return op->Send(op); });
}

absl::Status Semaphore::Release(const Lease& lease, StatusCallback callback) {
  return ReleaseAndReport(core_, kPolicy, lease, std::move(callback), [&](ReleaseReport report) {
    return core_->SendRelease(lease.resource, lease.token, std::move(report));
  });
}

absl::Status Semaphore::Extend(const Lease& lease, absl::Duration ttl,
                               LeaseCallback callback) {
  return ExtendAndReport(
      core_, kPolicy, lease, ttl, std::move(callback),
      [&](absl::Duration whole, ExtendReport report) {
        const std::string lock_key = core_->keys.LockKey(lease.resource);
        const std::string ttl_ms = absl::StrCat(TtlMillis(whole));
        const absl::string_view key_views[] = {lock_key};
        const absl::string_view arg_views[] = {lease.token, ttl_ms};
        return MakeLeaseCommand(SemaphoreExtendScript(), key_views, arg_views, OwnedReply{})
            .Send(*core_->transport, core_->command_timeout, std::move(report));
      });
}

}  // namespace dlock
