#include "dlock/redlock/attempt_releases.h"

#include <utility>

#include "dlock/lock/lock_commands.h"

namespace dlock {
namespace redlock_internal {

const std::string& AttemptReleases::Draw(int attempt, absl::Time now, absl::Time key_bound) {
  for (Attempt& a : attempts_) {
    if (!a.token.empty() && now >= a.key_bound) std::string().swap(a.token);
  }
  attempts_.resize(attempt);
  attempts_[attempt - 1] = Attempt{NewToken(), now, key_bound};
  return attempts_[attempt - 1].token;
}

bool AttemptReleases::MayStillExist(int attempt, absl::Time now) const {
  const Attempt& a = attempts_[attempt - 1];
  return !a.token.empty() && now < a.key_bound;
}

void AttemptReleases::AddLeftover(size_t server, int attempt) {
  for (const auto& l : leftovers_) {
    if (l.first == server && l.second == attempt) return;
  }
  leftovers_.emplace_back(server, attempt);
}

bool AttemptReleases::Send(const std::shared_ptr<Op>& owner, size_t i, int attempt,
                           uint32_t track) {
  const absl::Time sent_at = core_->loop()->Now();
  LeaseArgv a;
  const Server& server = core_->server(i);
  absl::Status sent =
      server.commands->ReleaseCommand(resource_, token(attempt), a)
          .Send(*server.transport, core_->Timeout(ttl_),
                ReleaseReply{owner, &AttemptReleases::OnReleaseReply, i, this, attempt, track,
                             sent_at});
  if (!sent.ok() && !closed_) AddLeftover(i, attempt);
  return sent.ok();
}

void AttemptReleases::OnReleaseReply(const ReleaseReply& reply, const absl::Status& status) {
  static_cast<AttemptReleases*>(reply.target)
      ->OnReply(reply.server, static_cast<int>(reply.number), reply.sent_at, reply.track,
                status);
}

void AttemptReleases::OnReply(size_t i, int attempt, absl::Time sent_at, uint32_t track,
                              const absl::Status& status) {
  const absl::Time now = core_->loop()->Now();
  core_->ReportVote(resource_, "release", i, status, now - sent_at);
  core_->run_ids().NoteResult(i, status);
  if (IsServerFailure(status) && !closed_ && MayStillExist(attempt, now)) {
    AddLeftover(i, attempt);
  }
  if (track != 0 && final_.IsCurrent(track)) Settle(i);
}

void AttemptReleases::SendEverywhere(const std::shared_ptr<Op>& owner, int attempt) {
  for (size_t i = 0; i < core_->n(); ++i) Send(owner, i, attempt);
}

void AttemptReleases::SendLeftovers(const std::shared_ptr<Op>& owner, size_t i) {
  const absl::Time now = core_->loop()->Now();
  absl::InlinedVector<int, 2> attempts;
  size_t kept = 0;
  for (size_t k = 0; k < leftovers_.size(); ++k) {
    if (leftovers_[k].first != i) {
      leftovers_[kept++] = leftovers_[k];
    } else if (MayStillExist(leftovers_[k].second, now)) {
      attempts.push_back(leftovers_[k].second);
    }
  }
  leftovers_.resize(kept);
  for (int attempt : attempts) Send(owner, i, attempt);
}

bool AttemptReleases::StartFinal(const std::shared_ptr<Op>& owner, int attempt,
                                 absl::Span<const bool> await,
                                 absl::AnyInvocable<void() &&> on_settled) {
  EventLoop* loop = core_->loop();
  const uint32_t generation = final_.Begin(loop, await.size(), loop->Now());
  for (size_t i = 0; i < await.size(); ++i) {
    const bool sent = Send(owner, i, attempt, await[i] ? generation : 0);
    if (!sent || !await[i]) final_.Set(i, Vote::kOut);
  }
  if (final_.Count().pending == 0) {
    final_.Close(loop);
    return false;
  }
  on_settled_ = std::move(on_settled);
  std::weak_ptr<Op> weak = owner;
  final_.ArmDeadline(loop, core_->Timeout(ttl_), [weak, self = this, generation] {
    std::shared_ptr<Op> alive = weak.lock();
    if (alive == nullptr || !self->final_.IsCurrent(generation)) return;
    self->final_.DeadlineFired();
    self->final_.ExpirePending();
    self->MaybeSettled();
  });
  return true;
}

bool AttemptReleases::OnLateReply(const std::shared_ptr<Op>& owner, size_t i, int attempt,
                                  const absl::StatusOr<int64_t>& fence, absl::string_view reason,
                                  bool final) {
  if (final && absl::IsDeadlineExceeded(fence.status())) {
    Settle(i);
    return false;
  }
  if (!fence.ok()) return false;
  if (reason.empty()) return true;
  core_->ReportLateGrant(resource_, "acquire", reason, i);
  Send(owner, i, attempt);
  return false;
}

void AttemptReleases::Settle(size_t i) {
  if (!final_.open() || final_.vote(i) != Vote::kPending) return;
  final_.Set(i, Vote::kYes);
  MaybeSettled();
}

void AttemptReleases::MaybeSettled() {
  if (final_.Count().pending > 0) return;
  final_.Close(core_->loop());
  absl::AnyInvocable<void() &&> on_settled = std::move(on_settled_);
  on_settled_ = nullptr;
  if (on_settled) std::move(on_settled)();
}

void AttemptReleases::Close() {
  closed_ = true;
  final_.Close(core_->loop());
  on_settled_ = nullptr;
}

void AttemptReleases::Abandon(const std::shared_ptr<Op>& owner, int in_flight) {
  Close();
  if (in_flight > 0) SendEverywhere(owner, in_flight);
  for (size_t i = 0; i < core_->n(); ++i) SendLeftovers(owner, i);
}

}  // namespace redlock_internal
}  // namespace dlock
