// FairWait: one Acquire waiting in the fair lock's queue (fair_lock.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/fair_lock_internal.h"
#include "dlock/lock/lease_cleanup.h"
#include "dlock/lock/lease_reports.h"
#include "dlock/lock/single_server_acquire.h"
#include "dlock/lock/tokens.h"

namespace dlock {
namespace {

// A placeholder token for a Leave with no attempt in flight: never equal to
// a lock key's value (tokens are hex).
constexpr char kNoToken[] = "-";

}  // namespace

FairWait::FairWait(std::shared_ptr<FairLock::Core> core, std::string resource,
                   absl::Duration ttl, absl::Duration wait, LeaseCallback callback)
    : core_(std::move(core)),
      resource_(std::move(resource)),
      waiter_(absl::StrCat(core_->instance_id, ":", NewToken())),
      ttl_(ttl),
      start_(core_->loop->Now()),
      deadline_(start_ + wait),
      callback_(std::move(callback)) {}

absl::Status FairWait::Start() {
  absl::Status s = Send();
  if (!s.ok()) return s;
  core_->waits[waiter_] = shared_from_this();
  FairLock::Core::EnsureSubscribed(core_);
  std::weak_ptr<FairWait> weak = shared_from_this();
  deadline_timer_ = core_->loop->RunAfter(deadline_ - start_, [weak] {
    if (std::shared_ptr<FairWait> w = weak.lock()) {
      w->deadline_timer_ = 0;
      w->OnDeadline();
    }
  });
  return absl::OkStatus();
}

absl::Status FairWait::Send() {
  std::string token = NewToken();
  const absl::Time sent_at = core_->loop->Now();
  const bool sent_subscribed = core_->subscribed;
  std::shared_ptr<FairWait> self = shared_from_this();
  absl::Status s = core_->commands.Acquire(
      resource_, token, waiter_, ttl_, core_->restart_window, core_->queue_ttl,
      core_->command_timeout,
      [self, token, sent_at, sent_subscribed](absl::StatusOr<FairAcquireReply> r) {
        self->OnReply(token, sent_at, sent_subscribed, std::move(r));
      });
  if (!s.ok()) return s;
  core_->attempts++;
  attempts_++;
  in_flight_token_ = std::move(token);
  woken_ = false;
  return absl::OkStatus();
}

void FairWait::OnReply(const std::string& token, absl::Time sent_at,
                       bool sent_subscribed, absl::StatusOr<FairAcquireReply> reply) {
  if (state_ != State::kPending) {
    // Abandoned (cancel, deadline): whatever this attempt did -- took the
    // lock, or queued us again behind the Leave -- undo it, unless it
    // surely did neither.
    const bool nothing = !reply.ok() && !IsUnknownOutcome(reply.status());
    if (!nothing) Leave(token);
    if (reply.ok() && reply->fence > 0) {
      ReportLateGrant(core_->observer, "fair", resource_, kLateGrantCancelled);
    }
    return;
  }
  in_flight_token_.clear();
  const absl::Time now = core_->loop->Now();
  if (reply.ok() && reply->fence > 0) {
    absl::StatusOr<Lease> lease = FinishAcquire(
        {"fair", resource_, token, ttl_, sent_at, sent_at + ttl_ - core_->Drift(ttl_)},
        reply->fence, now, ObserverOrNoop(nullptr),
        [this, &token, sent_at] { Undo(token, sent_at + ttl_); });
    if (lease.ok()) return Finish(std::move(lease));
    // Granted too late to use (released in the background): go on waiting.
    ReportLateGrant(core_->observer, "fair", resource_, kLateGrantExpired);
    last_error_ = lease.status();
    return ScheduleAttempt(absl::ZeroDuration());
  }
  if (reply.ok()) return OnQueued(*reply, sent_subscribed);
  last_error_ = reply.status();
  if (IsUnknownOutcome(reply.status())) {
    // A lost reply may have taken the lock: give that token back (the
    // young-data-set refusal took nothing). Try again at the next refresh.
    if (!IsYoungDataSet(reply.status())) Undo(token, sent_at + ttl_);
    return ScheduleAttempt(core_->queue_ttl / 3);
  }
  Leave(kNoToken);
  Finish(reply.status());
}

void FairWait::OnQueued(const FairAcquireReply& reply, bool sent_subscribed) {
  last_queued_ = reply;
  last_error_ = absl::AbortedError(absl::StrCat("queued at position ", reply.position,
                                                " of ", reply.waiters));
  ReportAcquireWait(core_->observer, "fair", resource_, attempts_, last_error_,
                    core_->queue_ttl / 3, deadline_ - core_->loop->Now());
  queued_unsubscribed_ = !sent_subscribed;
  if (woken_ || (!sent_subscribed && core_->subscribed)) {
    // Woken while in flight, or subscribed meanwhile (a notification may
    // have gone out before): try again now.
    return ScheduleAttempt(absl::ZeroDuration());
  }
  ScheduleAttempt(core_->queue_ttl / 3);
}

void FairWait::ScheduleAttempt(absl::Duration delay) {
  if (timer_ != 0) core_->loop->Cancel(timer_);
  timer_ = 0;
  const absl::Duration left = deadline_ - core_->loop->Now();
  if (delay >= left) return;  // the deadline timer ends the wait
  if (delay <= absl::ZeroDuration()) {
    absl::Status s = Send();
    if (s.ok()) return;
    // Rejected by the transport: finish on a later turn (not inside a
    // notification or reply callback of someone else's).
    last_error_ = s;
    delay = absl::ZeroDuration();
    std::weak_ptr<FairWait> weak = shared_from_this();
    timer_ = core_->loop->RunAfter(delay, [weak, s] {
      std::shared_ptr<FairWait> w = weak.lock();
      if (w == nullptr || w->state_ != State::kPending) return;
      w->timer_ = 0;
      w->Leave(kNoToken);
      w->Finish(s);
    });
    return;
  }
  std::weak_ptr<FairWait> weak = shared_from_this();
  timer_ = core_->loop->RunAfter(delay, [weak] {
    std::shared_ptr<FairWait> w = weak.lock();
    if (w == nullptr || w->state_ != State::kPending) return;
    w->timer_ = 0;
    w->ScheduleAttempt(absl::ZeroDuration());
  });
}

void FairWait::OnWake() {
  if (state_ != State::kPending) return;
  if (!in_flight_token_.empty()) {
    woken_ = true;
    return;
  }
  ScheduleAttempt(absl::ZeroDuration());
}

void FairWait::OnSubscribed() {
  if (state_ != State::kPending || !queued_unsubscribed_) return;
  queued_unsubscribed_ = false;
  OnWake();
}

void FairWait::OnDeadline() {
  if (state_ != State::kPending) return;
  std::string message = WaitDeadlineMessage("fair lock", deadline_ - start_, attempts_);
  if (last_queued_.waiters > 0) {
    absl::StrAppend(&message, "; last at position ", last_queued_.position, " of ",
                    last_queued_.waiters);
  }
  absl::StrAppend(&message, ")");
  if (!last_error_.ok() && !absl::IsAborted(last_error_)) {
    absl::StrAppend(&message, "; last attempt: ", last_error_.ToString());
  }
  // An attempt in flight is abandoned: its reply (see OnReply) undoes it.
  Leave(in_flight_token_.empty() ? std::string(kNoToken) : in_flight_token_);
  Finish(absl::DeadlineExceededError(message));
}

bool FairWait::Cancel() {
  if (state_ != State::kPending) return false;
  state_ = State::kCancelled;
  LeaseCallback dropped = std::move(callback_);
  (void)dropped;  // destroyed here, before Cancel returns
  Leave(in_flight_token_.empty() ? std::string(kNoToken) : in_flight_token_);
  Detach();
  return true;
}

void FairWait::Leave(const std::string& token) {
  FairLock::Core::ReleaseInBackground(core_, resource_, token, waiter_,
                                      core_->loop->Now() + std::max(ttl_, core_->queue_ttl));
}

void FairWait::Undo(const std::string& token, absl::Time key_expiry) {
  FairLock::Core::ReleaseInBackground(core_, resource_, token, "", key_expiry);
}

void FairWait::Detach() {
  if (timer_ != 0) core_->loop->Cancel(timer_);
  if (deadline_timer_ != 0) core_->loop->Cancel(deadline_timer_);
  timer_ = deadline_timer_ = 0;
  auto it = core_->waits.find(waiter_);
  if (it != core_->waits.end() && it->second.get() == this) {
    // The caller holds another reference (Cancel: the handle's; Finish: a
    // reply's or a timer's), so this is not destroyed here.
    core_->waits.erase(it);
  }
}

void FairWait::Finish(absl::StatusOr<Lease> result) {
  state_ = State::kDone;
  Detach();
  const absl::Duration latency = core_->loop->Now() - start_;
  ReportAcquire(core_->observer, "fair", resource_, result, latency,
                result.ok() ? latency : absl::ZeroDuration(), attempts_);
  LeaseCallback cb = std::move(callback_);
  // The user may destroy the FairLock in the callback: touch nothing after.
  std::move(cb)(std::move(result));
}

}  // namespace dlock
