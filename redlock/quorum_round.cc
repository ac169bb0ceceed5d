#include "dlock/redlock/quorum_round.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace redlock_internal {

uint32_t QuorumRound::Begin(EventLoop* loop, size_t n, absl::Time sent_at) {
  Close(loop);
  open_ = true;
  ++generation_;
  sent_at_ = sent_at;
  last_error_ = absl::OkStatus();
  slots_.assign(n, Slot{});
  return generation_;
}

void QuorumRound::Close(EventLoop* loop) {
  open_ = false;
  if (timer_ != 0) {
    loop->Cancel(timer_);
    timer_ = 0;
  }
}

void QuorumRound::Record(size_t i, const absl::Status& status, Vote yes) {
  if (status.ok()) {
    Set(i, yes);
  } else if (absl::IsFailedPrecondition(status)) {
    Set(i, Vote::kNo);
  } else {
    Fail(i, status);
  }
}

void QuorumRound::Fail(size_t i, const absl::Status& status, bool timeouts) {
  slots_[i].vote =
      timeouts && absl::IsDeadlineExceeded(status) ? Vote::kTimedOut : Vote::kFailed;
  last_error_ = status;
}

std::string QuorumRound::LastErrorSuffix() const {
  if (last_error_.ok()) return "";
  return absl::StrCat("; last error: ", last_error_.ToString());
}

void QuorumRound::ExpirePending() {
  for (Slot& slot : slots_) {
    if (slot.vote == Vote::kPending) slot.vote = Vote::kTimedOut;
  }
}

Tally QuorumRound::Count() const {
  Tally t;
  t.servers = static_cast<int>(slots_.size());
  for (const Slot& slot : slots_) {
    switch (slot.vote) {
      case Vote::kPending: ++t.pending; break;
      case Vote::kYes: ++t.yes; break;
      case Vote::kNo: ++t.no; break;
      case Vote::kFailed: ++t.failed; break;
      case Vote::kTimedOut: ++t.failed; ++t.timed_out; break;
      case Vote::kUncounted: ++t.uncounted; break;
      case Vote::kOut: break;
    }
  }
  return t;
}

void QuorumRound::ArmDeadline(EventLoop* loop, absl::Duration delay,
                              absl::AnyInvocable<void() &&> on_deadline) {
  if (timer_ != 0) loop->Cancel(timer_);
  timer_ = loop->RunAfter(delay, std::move(on_deadline));
}

void QuorumOpBase::EndRound() {
  round_.Close(loop());
  done_ = true;
  core_->Unregister(this);
}

void QuorumOpBase::PostInRoundOf(uint32_t generation, Method method) {
  std::weak_ptr<Op> weak = weak_from_this();
  loop()->RunAfter(absl::ZeroDuration(), [weak, generation, method] {
    std::shared_ptr<Op> op = weak.lock();
    if (op == nullptr) return;
    auto* self = static_cast<QuorumOpBase*>(op.get());
    if (self->round_.IsCurrent(generation)) (self->*method)();
  });
}

void QuorumOpBase::ArmRoundDeadlineOf(absl::Duration delay, Method method) {
  std::weak_ptr<Op> weak = weak_from_this();
  const uint32_t generation = round_.generation();
  round_.ArmDeadline(loop(), delay, [weak, generation, method] {
    std::shared_ptr<Op> op = weak.lock();
    if (op == nullptr) return;
    auto* self = static_cast<QuorumOpBase*>(op.get());
    if (!self->round_.IsCurrent(generation)) return;
    self->round_.DeadlineFired();
    (self->*method)();
  });
}

}  // namespace redlock_internal
}  // namespace dlock
