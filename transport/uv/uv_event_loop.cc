#include "dlock/transport/uv/uv_event_loop.h"

#include <uv.h>

#include <cstdint>
#include <utility>

namespace dlock {

struct UvEventLoop::Handle {
  uv_timer_t timer;
  UvEventLoop* owner;  // null once the owner is gone
};

namespace {

int64_t NowNanos() { return static_cast<int64_t>(uv_hrtime()); }

}  // namespace

UvEventLoop::UvEventLoop(uv_loop_s* loop) : loop_(loop), handle_(new Handle) {
  uv_timer_init(loop_, &handle_->timer);
  handle_->owner = this;
  handle_->timer.data = handle_;
}

UvEventLoop::~UvEventLoop() {
  if (destroyed_ != nullptr) *destroyed_ = true;
  handle_->owner = nullptr;
  uv_timer_stop(&handle_->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer), [](uv_handle_t* h) {
    delete static_cast<Handle*>(h->data);
  });
  // Pending callbacks are destroyed (not run) with queue_.
}

absl::Time UvEventLoop::Now() const {
  return absl::UnixEpoch() + absl::Nanoseconds(NowNanos());
}

TimerId UvEventLoop::RunAfter(absl::Duration delay,
                              absl::AnyInvocable<void() &&> callback) {
  int64_t delay_ns = delay <= absl::ZeroDuration()
                         ? 0
                         : (delay >= absl::Hours(24 * 365 * 100)
                                ? int64_t{1} << 62
                                : absl::ToInt64Nanoseconds(delay));
  const TimerId id = next_id_++;
  const int64_t deadline = NowNanos() + delay_ns;
  const bool earliest = queue_.empty() || Key(deadline, id) < queue_.begin()->first;
  queue_.emplace(Key(deadline, id), std::move(callback));
  deadline_of_.emplace(id, deadline);
  // While RunDue is running it re-arms at the end.
  if (earliest && destroyed_ == nullptr) Arm();
  return id;
}

bool UvEventLoop::Cancel(TimerId id) {
  auto it = deadline_of_.find(id);
  if (it == deadline_of_.end()) return false;
  const bool was_earliest = queue_.begin()->first == Key(it->second, id);
  auto node = queue_.extract(Key(it->second, id));
  deadline_of_.erase(it);
  // Destroy the callback before returning, as the contract promises; it may
  // itself own objects that call Cancel, so the map is already consistent.
  node = {};
  // The uv timer was armed for the cancelled deadline: re-arm it for the
  // next one, or stop it, so a cancelled timer does not keep the loop alive
  // until its old deadline (e.g. a closed transport's connect timeout).
  // While RunDue is running it re-arms at the end.
  if (was_earliest && destroyed_ == nullptr) Arm();
  return true;
}

void UvEventLoop::OnUvTimer(void* self) {
  static_cast<UvEventLoop*>(self)->RunDue();
}

void UvEventLoop::RunDue() {
  bool destroyed = false;
  destroyed_ = &destroyed;
  const int64_t now = NowNanos();
  const TimerId last_old_id = next_id_ - 1;
  while (!queue_.empty()) {
    auto it = queue_.begin();
    if (it->first.first > now || it->first.second > last_old_id) break;
    auto node = queue_.extract(it);
    deadline_of_.erase(node.key().second);
    absl::AnyInvocable<void() &&> callback = std::move(node.mapped());
    std::move(callback)();
    if (destroyed) return;  // `this` is gone; touch nothing.
  }
  destroyed_ = nullptr;
  Arm();
}

void UvEventLoop::Arm() {
  if (queue_.empty()) {
    uv_timer_stop(&handle_->timer);
    return;
  }
  const int64_t remaining = queue_.begin()->first.first - NowNanos();
  // Round up to whole milliseconds (libuv's timer unit); a timer that fires
  // a little early finds nothing due and re-arms.
  const uint64_t ms = remaining <= 0 ? 0 : (remaining + 999999) / 1000000;
  uv_timer_start(
      &handle_->timer,
      [](uv_timer_t* t) {
        Handle* h = static_cast<Handle*>(t->data);
        if (h->owner != nullptr) OnUvTimer(h->owner);
      },
      ms, 0);
}

}  // namespace dlock
