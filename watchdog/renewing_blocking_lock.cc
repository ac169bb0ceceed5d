#include "dlock/watchdog/renewing_blocking_lock.h"

#include <utility>

namespace dlock {

RenewingBlockingLock::RenewingBlockingLock(LoopThread* thread, dlock::Lock* lock,
                                           RenewingBlockingLockOptions options)
    : BlockingLock(thread, lock), options_(std::move(options)) {}

RenewingBlockingLock::~RenewingBlockingLock() {
  // Releases what guards still hold and tears the watchdog down on the loop
  // thread (OnShutdown), while this object is still whole.
  Shutdown();
  // Shutdown could not reach the loop thread (it is stopping and runs
  // nothing more of ours): nothing can race with this.
  watchdog_.reset();
}

void RenewingBlockingLock::OnShutdown() { watchdog_.reset(); }

void RenewingBlockingLock::OnAcquired(const std::shared_ptr<GuardState>& state) {
  if (watchdog_ == nullptr) {
    watchdog_ = std::make_unique<Watchdog>(thread()->loop(), lock(),
                                           options_.watchdog);
  }
  WatchOptions watch;
  watch.renew_interval = options_.renew_interval;
  watch.retry_interval = options_.retry_interval;
  // Weak: the state owns the watch handle (in before_release), which owns
  // this callback.
  std::weak_ptr<GuardState> weak = state;
  watch.on_lost = [this, weak](absl::Status why) {
    std::shared_ptr<GuardState> s = weak.lock();
    if (s == nullptr) return;
    s->lost.store(true, std::memory_order_release);
    if (options_.on_lost) options_.on_lost(s->lease, why);
  };
  absl::StatusOr<WatchHandle> handle =
      watchdog_->Watch(state->lease, std::move(watch));
  if (!handle.ok()) {
    // Expired before it reached us (or unusable): hand it out invalid.
    state->lost.store(true, std::memory_order_release);
    return;
  }
  // Runs on the loop thread before the release is sent (or on detach). The
  // handle may be destroyed with the state on another thread afterwards;
  // a stopped handle's destructor touches nothing shared.
  state->before_release = [h = *std::move(handle)]() mutable { h.Stop(); };
}

}  // namespace dlock
