#include "dlock/transport/uv/command_deadlines.h"

#include <uv.h>

#include <utility>

namespace dlock {
namespace {

// Deadlines further away than this are treated as "never" (no overflow).
constexpr int64_t kFarAwayNs = int64_t{1} << 62;

}  // namespace

DeadlineNode::~DeadlineNode() {
  if (deadline_owner != nullptr) deadline_owner->Remove(this);
}

CommandDeadlines::CommandDeadlines(uv_loop_s* loop, OnExpired on_expired)
    : on_expired_(std::move(on_expired)) {
  timer_ = new uv_timer_t;
  uv_timer_init(loop, timer_);
  timer_->data = this;
  // Referenced only while a deadline is pending (see Add).
  uv_unref(reinterpret_cast<uv_handle_t*>(timer_));
}

CommandDeadlines::~CommandDeadlines() { Close(); }

void CommandDeadlines::Add(DeadlineNode* r, absl::Duration timeout) {
  const int64_t t = timeout >= absl::Nanoseconds(kFarAwayNs)
                        ? kFarAwayNs
                        : absl::ToInt64Nanoseconds(timeout);
  r->deadline_ns = static_cast<int64_t>(uv_hrtime()) + t;
  r->deadline_owner = this;
  if (head_ == nullptr && timer_ != nullptr) {
    uv_ref(reinterpret_cast<uv_handle_t*>(timer_));
  }
  // Sorted by deadline; a command almost always has the latest one.
  DeadlineNode* after = tail_;
  while (after != nullptr && after->deadline_ns > r->deadline_ns) {
    after = after->deadline_prev;
  }
  r->deadline_prev = after;
  r->deadline_next = after != nullptr ? after->deadline_next : head_;
  if (r->deadline_next != nullptr) {
    r->deadline_next->deadline_prev = r;
  } else {
    tail_ = r;
  }
  if (after != nullptr) {
    after->deadline_next = r;
  } else {
    head_ = r;
    Arm();
  }
}

void CommandDeadlines::Remove(DeadlineNode* r) {
  if (r->deadline_owner == nullptr) return;
  if (r->deadline_prev != nullptr) {
    r->deadline_prev->deadline_next = r->deadline_next;
  } else {
    head_ = r->deadline_next;
  }
  if (r->deadline_next != nullptr) {
    r->deadline_next->deadline_prev = r->deadline_prev;
  } else {
    tail_ = r->deadline_prev;
  }
  r->deadline_owner = nullptr;
  r->deadline_prev = r->deadline_next = nullptr;
  // The timer may stay armed (it finds nothing due and stops), but it no
  // longer keeps the loop alive.
  if (head_ == nullptr && timer_ != nullptr) {
    uv_unref(reinterpret_cast<uv_handle_t*>(timer_));
  }
}

void CommandDeadlines::Arm() {
  if (timer_ == nullptr || head_ == nullptr) return;
  const int64_t due = head_->deadline_ns;
  // Already armed to fire no later than needed: leave it.
  if (armed_ns_ != 0 && armed_ns_ <= due) return;
  const int64_t now = static_cast<int64_t>(uv_hrtime());
  const uint64_t ms = due > now ? static_cast<uint64_t>((due - now + 999999) / 1000000) : 0;
  uv_timer_start(
      timer_,
      [](uv_timer_t* t) { static_cast<CommandDeadlines*>(t->data)->OnTimer(); },
      ms, 0);
  armed_ns_ = due;
}

void CommandDeadlines::OnTimer() {
  armed_ns_ = 0;
  // libuv's timers count from the loop's cached time, so this may run a
  // little early: what is not due yet re-arms the timer.
  const int64_t now = static_cast<int64_t>(uv_hrtime());
  while (head_ != nullptr && head_->deadline_ns <= now) {
    DeadlineNode* r = head_;
    Remove(r);
    if (!on_expired_(r)) return;  // the owner, and this list, are gone
  }
  Arm();
}

void CommandDeadlines::Close() {
  if (timer_ == nullptr) return;
  uv_timer_stop(timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(timer_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  timer_ = nullptr;
  armed_ns_ = 0;
}

}  // namespace dlock
