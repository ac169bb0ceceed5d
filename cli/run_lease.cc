#include "dlock/cli/run_lease.h"

#include <memory>
#include <utility>

#include "dlock/lock/multi_lock.h"

namespace dlock {
namespace cli {

RunLease::RunLease(EventLoop* loop, std::unique_ptr<RunLock> lock, LockObserver* observer)
    : loop_(loop), observer_(observer), lock_(std::move(lock)) {}

RunLease::~RunLease() {
  // The watch before its watchdog, the watchdog before the lock it renews.
  watch_ = WatchHandle();
  watchdog_.reset();
  lock_.reset();
}

absl::Status RunLease::Acquire(const std::string& resource, const AcquireOptions& options,
                               std::function<void(absl::StatusOr<Lease>)> done) {
  absl::StatusOr<AcquireHandle> handle = lock_->lock().Acquire(
      resource, options, [this, done = std::move(done)](absl::StatusOr<Lease> lease) {
        acquire_ = AcquireHandle();
        if (lease.ok()) lease_ = *lease;
        done(std::move(lease));
      });
  if (!handle.ok()) return handle.status();
  acquire_ = *handle;
  return absl::OkStatus();
}

std::optional<std::vector<int64_t>> RunLease::SetFences() const {
  if (!lock_->is_set()) return std::nullopt;
  std::vector<int64_t> fences;
  absl::StatusOr<std::vector<Lease>> subs = ResourceSetLock::SubLeases(lease_);
  if (subs.ok()) {
    for (const Lease& l : *subs) fences.push_back(l.fence);
  }
  return fences;
}

absl::Status RunLease::Watch(std::function<void(absl::Status)> on_lost) {
  WatchdogOptions wo;
  wo.observer = observer_;
  watchdog_ = std::make_unique<Watchdog>(loop_, &lock_->lock(), wo);
  WatchOptions watch_options;
  watch_options.on_lost = std::move(on_lost);
  absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease_, std::move(watch_options));
  if (!watch.ok()) return watch.status();
  watch_ = *std::move(watch);
  watching_ = true;
  return absl::OkStatus();
}

std::optional<absl::Time> RunLease::WatchedDeadline() const {
  if (!watching_ || !watch_.active()) return std::nullopt;
  return watch_.lease().deadline;
}

void RunLease::Release(std::function<void(absl::Status)> done) {
  absl::Status s;
  if (watching_) {
    s = watch_.Release([done](absl::Status st) { done(st); });
  } else {
    s = lock_->lock().Release(lease_, [done](absl::Status st) { done(st); });
  }
  if (!s.ok()) done(s);
}

}  // namespace cli
}  // namespace dlock
