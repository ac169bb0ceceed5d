#include "dlock/blocking/held_leases.h"

#include <utility>

namespace dlock {

std::shared_ptr<GuardState> HeldLeases::Adopt(Lease lease) {
  auto state = std::make_shared<GuardState>();
  state->lease = std::move(lease);
  if (auto_renew_) StartRenewal(state);
  held_[state.get()] = state;
  return state;
}

void HeldLeases::StartRenewal(const std::shared_ptr<GuardState>& state) {
  if (watchdog_ == nullptr) {
    watchdog_ = std::make_unique<Watchdog>(loop_, lock_, renewal_.watchdog);
  }
  WatchOptions watch;
  watch.renew_interval = renewal_.renew_interval;
  watch.retry_interval = renewal_.retry_interval;
  // Weak: the state owns the watch handle, which owns this callback.
  std::weak_ptr<GuardState> weak = state;
  watch.on_lost = [this, weak](absl::Status why) {
    std::shared_ptr<GuardState> s = weak.lock();
    if (s == nullptr) return;
    s->lost.store(true, std::memory_order_release);
    if (renewal_.on_lost) renewal_.on_lost(s->lease, why);
  };
  absl::StatusOr<WatchHandle> handle = watchdog_->Watch(state->lease, std::move(watch));
  if (!handle.ok()) {
    // Expired before it reached us (or unusable): hand it out invalid.
    state->lost.store(true, std::memory_order_release);
    return;
  }
  state->watch = *std::move(handle);
}

void HeldLeases::Forget(GuardState* state) {
  held_.erase(state);
  state->StopRenewal();
}

absl::Status HeldLeases::Release(GuardState* state,
                                 StatusCallback callback) {
  Forget(state);
  return lock_->Release(state->lease, std::move(callback));
}

void HeldLeases::ReleaseAll(bool can_send, const std::function<void()>& begun,
                            const std::function<void()>& ended) {
  // (Including those whose guard's Unlock was refused by the closed gate:
  // held_ keeps them alive for this.)
  std::unordered_map<const GuardState*, std::shared_ptr<GuardState>> held = std::move(held_);
  held_.clear();
  for (auto& [raw, state] : held) {
    state->released_at_shutdown.store(true, std::memory_order_release);
    state->lost.store(true, std::memory_order_release);
    state->StopRenewal();
    if (!can_send) continue;
    begun();
    absl::Status s = lock_->Release(state->lease, [ended](absl::Status) { ended(); });
    if (!s.ok()) ended();
  }
  // Every watch is stopped: the watchdog goes (only on the loop thread).
  if (can_send) watchdog_.reset();
}

}  // namespace dlock
