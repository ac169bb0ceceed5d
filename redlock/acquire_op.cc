// RedLock's Acquire: attempts of one voting round each (decided at quorum),
// the fencing write-back, retries, and the release of whatever a failed or
// abandoned attempt took (see ACQUIRE, RETRIES and FENCING in redlock.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/redlock/operations.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace redlock_internal {
namespace {

// Raises the fencing counter KEYS[1] to ARGV[1] if it is lower; never lowers
// it. Replies with the counter's value afterwards. A counter that is not an
// integer is an error (foreign data), like INCR's.
const Script& RaiseFenceScript() {
  static const Script* const s = new Script(R"lua(
local f = tonumber(ARGV[1])
local c = redis.call('get', KEYS[1])
if c == false then c = 0 else c = tonumber(c) end
if c == nil then
  return redis.error_reply('ERR value is not an integer or out of range')
end
if c < f then
  redis.call('set', KEYS[1], ARGV[1])
  return f
end
return c
)lua");
  return *s;
}

}  // namespace

// ---------------------------------------------------------------- tokens

const std::string& AttemptTokens::Draw(int attempt, absl::Time now, absl::Time key_bound) {
  for (Attempt& a : attempts_) {
    if (!a.token.empty() && now >= a.key_bound) std::string().swap(a.token);
  }
  attempts_.resize(attempt);
  attempts_[attempt - 1] = Attempt{NewToken(), now, key_bound};
  return attempts_[attempt - 1].token;
}

bool AttemptTokens::MayStillExist(int attempt, absl::Time now) const {
  const Attempt& a = attempts_[attempt - 1];
  return !a.token.empty() && now < a.key_bound;
}

void AttemptTokens::AddLeftover(size_t server, int attempt) {
  for (const auto& l : leftovers_) {
    if (l.first == server && l.second == attempt) return;
  }
  leftovers_.emplace_back(server, attempt);
}

absl::InlinedVector<int, 2> AttemptTokens::TakeLeftovers(size_t server, absl::Time now) {
  absl::InlinedVector<int, 2> out;
  size_t kept = 0;
  for (size_t k = 0; k < leftovers_.size(); ++k) {
    if (leftovers_[k].first != server) {
      leftovers_[kept++] = leftovers_[k];
    } else if (MayStillExist(leftovers_[k].second, now)) {
      out.push_back(leftovers_[k].second);
    }
  }
  leftovers_.resize(kept);
  return out;
}

// ---------------------------------------------------------------- AcquireOp

AcquireOp::AcquireOp(std::shared_ptr<Core> core, absl::string_view resource,
                     const AcquireOptions& options, LeaseCallback callback)
    : QuorumOp(std::move(core), std::move(callback)),
      resource_(resource),
      ttl_(WholeMillis(options.ttl)),
      wait_(options.wait),
      call_time_(core_->loop()->Now()) {}

bool AcquireOp::Cancel() {
  if (phase_ == Phase::kDone) return false;
  std::shared_ptr<Op> self = shared_from_this();
  const Phase phase = phase_;
  phase_ = Phase::kDone;
  Drop(absl::CancelledError("acquire cancelled"));
  Abandon(phase);
  return true;
}

void AcquireOp::Shutdown() {
  if (phase_ == Phase::kDone) return;
  std::shared_ptr<Op> self = shared_from_this();
  const Phase phase = phase_;
  phase_ = Phase::kDone;
  CompleteLater(absl::CancelledError("RedLock destroyed"));
  Abandon(phase);
}

void AcquireOp::StartAttempt(bool may_decide_now) {
  phase_ = Phase::kVoting;
  const int attempt = ++attempt_;
  t0_ = loop()->Now();
  const size_t n = core_->n();
  const absl::Duration timeout = core_->Timeout(ttl_);
  // However late a request of this attempt is applied, its key is gone by
  // then (best effort: a request delayed longer in the network could
  // outlive it; such a key still expires by itself).
  const std::string& token = tokens_.Draw(attempt, t0_, t0_ + 2 * timeout + ttl_);
  const uint32_t generation = round_.Begin(loop(), n, t0_);
  bool rejected = false;
  for (size_t i = 0; i < n; ++i) {
    // Leftovers of earlier attempts first: same connection, so the server
    // deletes them before it sees this attempt's acquire.
    ReleaseLeftovers(i);
    // The run_id is probed (when due) only to tell one instance listed
    // twice; a young data set refuses inside the acquire script.
    core_->BeforeLockCommand(i, timeout, /*gates_votes=*/false);
    auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
    absl::Status sent = core_->server(i).commands->TryAcquire(
        resource_, token, ttl_, core_->RestartWindow(), timeout,
        [self, attempt, generation, i](absl::StatusOr<int64_t> fence) {
          self->OnAcquireReply(attempt, generation, i, std::move(fence));
        });
    if (!sent.ok()) {
      round_.Fail(i, sent);
      core_->NoteResult(i, sent);
      rejected = true;
    }
  }
  ArmRoundDeadline(std::min(timeout, ValidityEnd() - t0_), &AcquireOp::OnVotingDeadline);
  if (!rejected) return;
  if (may_decide_now) {
    Evaluate();
  } else {
    PostInRound(generation, &AcquireOp::Evaluate);  // not inside Acquire()
  }
}

void AcquireOp::OnAcquireReply(int attempt, uint32_t generation, size_t i,
                               absl::StatusOr<int64_t> fence) {
  const absl::Time now = loop()->Now();
  core_->ReportVote(resource_, "acquire", i, fence.status(), now - tokens_.sent_at(attempt));
  core_->NoteResult(i, fence.status());
  if (!round_.IsCurrent(generation) || phase_ != Phase::kVoting) {
    OnStraggler(attempt, i, fence);
    return;
  }
  if (fence.ok()) {
    round_.Set(i, Vote::kYes);
    round_.set_value(i, *fence);
  } else if (IsYoungDataSet(fence.status())) {
    round_.Set(i, Vote::kUncounted);
    round_.NoteError(fence.status());
    core_->NoteYoung(i, fence.status());
  } else if (absl::IsAborted(fence.status())) {
    round_.Set(i, Vote::kNo);
  } else {
    round_.Fail(i, fence.status(), /*timeouts=*/true);
  }
  Evaluate();
}

// A reply after its attempt was decided.
void AcquireOp::OnStraggler(int attempt, size_t i, const absl::StatusOr<int64_t>& fence) {
  if (attempt == attempt_ && phase_ == Phase::kReleasing &&
      absl::IsDeadlineExceeded(fence.status())) {
    // A straggler of the failed last attempt timed out: do not wait for
    // its release either.
    Settle(i);
    return;
  }
  if (!fence.ok()) return;
  // A grant of the attempt that succeeded or is syncing is part of that
  // lease and stays. A grant for an attempt that was given up is released
  // again (the release sent at the decision normally already ran after it,
  // but not if the acquire went through a NOSCRIPT fallback).
  const bool kept = attempt == succeeded_attempt_ ||
                    (attempt == attempt_ && phase_ == Phase::kSyncing);
  if (!kept) {
    SendRelease(i, attempt);
  } else if (*fence < fence_) {
    // A late grant of the lease with a lagging counter: raise it too, so the
    // counters converge (not needed for the guarantee, which rests on the
    // quorum confirmed before success).
    SendRaiseFence(i, /*generation=*/0);
  }
}

void AcquireOp::OnVotingDeadline() {
  round_.ExpirePending();
  Decide(/*round_over=*/true);
}

// Decides the voting round if its outcome is known.
void AcquireOp::Decide(bool round_over) {
  if (phase_ != Phase::kVoting) return;
  if (!core_->misconfigured().ok()) {
    final_ = true;
    FailAttempt(core_->misconfigured());
    return;
  }
  const absl::Time now = loop()->Now();
  const Tally t = round_.Count();
  if (t.yes >= core_->quorum()) {
    if (now >= ValidityEnd()) {
      FailAttempt(absl::DeadlineExceededError(absl::StrCat(
          "quorum reached after ", absl::FormatDuration(now - t0_),
          ": no validity left of ttl ", absl::FormatDuration(ttl_))));
      return;
    }
    StartFenceSync();
    return;
  }
  if (t.yes + t.pending >= core_->quorum()) return;  // still possible
  FailAttempt(Failure(round_over));
}

absl::Status AcquireOp::Failure(bool round_over) {
  const Tally t = round_.Count();
  const std::string counts = absl::StrFormat(
      "%d of %d servers granted (need %d): %d held by another owner, "
      "%d failed (%d timed out), %d young (data set began less than the "
      "restart window ago)",
      t.yes, t.servers, core_->quorum(), t.no, t.failed, t.timed_out, t.uncounted);
  if (round_over && loop()->Now() >= ValidityEnd()) {
    return absl::DeadlineExceededError(
        absl::StrCat("validity ran out during acquire: ", counts));
  }
  if (t.no > 0) {
    return absl::AbortedError(absl::StrCat("lock is held by another owner: ", counts));
  }
  return absl::UnavailableError(
      absl::StrCat("not enough servers: ", counts, round_.LastErrorSuffix()));
}

// Makes a quorum of the granting servers hold a fencing counter >= the
// lease's fence (see FENCING in redlock.h): a round over the granting
// servers whose counter lags.
void AcquireOp::StartFenceSync() {
  phase_ = Phase::kSyncing;
  const size_t n = round_.size();
  absl::InlinedVector<Vote, QuorumRound::kInlineServers> votes(n);
  absl::InlinedVector<int64_t, QuorumRound::kInlineServers> fences(n);
  fence_ = 0;
  for (size_t i = 0; i < n; ++i) {
    votes[i] = round_.vote(i);
    fences[i] = round_.value(i);
    if (votes[i] == Vote::kYes) fence_ = std::max(fence_, fences[i]);
  }
  int confirmed = 0;
  for (size_t i = 0; i < n; ++i) confirmed += votes[i] == Vote::kYes && fences[i] == fence_;
  if (confirmed >= core_->quorum()) {
    Succeed();
    return;
  }
  const uint32_t generation = round_.Begin(loop(), n, loop()->Now());
  for (size_t i = 0; i < n; ++i) {
    if (votes[i] != Vote::kYes) {
      // Not granting; a voting timeout is kept for the final release.
      round_.Set(i, votes[i] == Vote::kTimedOut ? Vote::kTimedOut : Vote::kOut);
    } else if (fences[i] == fence_) {
      round_.Set(i, Vote::kYes);
    } else if (!SendRaiseFence(i, generation)) {
      round_.Set(i, Vote::kFailed);
    }
  }
  const Tally t = round_.Count();
  if (t.yes + t.pending < core_->quorum()) {
    FailAttempt(absl::UnavailableError(
        "could not bring the fencing counters of a quorum up to date"));
    return;
  }
  ArmRoundDeadline(std::min(core_->Timeout(ttl_), ValidityEnd() - loop()->Now()),
                   &AcquireOp::OnSyncDeadline);
}

// Sends the fence write-back (raise to fence_) to server i, counted in the
// round `generation` (0: fire and forget). Returns whether it was sent.
bool AcquireOp::SendRaiseFence(size_t i, uint32_t generation) {
  Server& server = core_->server(i);
  auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
  const absl::Time sent_at = loop()->Now();
  absl::Status sent = RaiseFenceScript().Run(
      *server.transport, {server.commands->keys().FenceKey(resource_)},
      {absl::StrCat(fence_)}, core_->Timeout(ttl_),
      [self, generation, i, sent_at](absl::StatusOr<Reply> reply) {
        self->OnSyncReply(generation, i, sent_at, std::move(reply));
      });
  if (!sent.ok()) core_->NoteResult(i, sent);
  return sent.ok();
}

void AcquireOp::OnSyncReply(uint32_t generation, size_t i, absl::Time sent_at,
                            absl::StatusOr<Reply> reply) {
  absl::Status status = absl::OkStatus();
  if (!reply.ok()) {
    status = reply.status();
  } else if (reply->is_error()) {
    status = absl::UnavailableError(absl::StrCat("fence write-back: ", reply->str));
  } else if (!reply->is_integer() || reply->integer < fence_) {
    status = absl::InternalError(
        absl::StrCat("unexpected reply to fence write-back: ", reply->DebugString()));
  }
  core_->ReportVote(resource_, "fence", i, status, loop()->Now() - sent_at);
  core_->NoteResult(i, status);
  if (!round_.IsCurrent(generation) || phase_ != Phase::kSyncing) return;
  round_.Set(i, status.ok() ? Vote::kYes : Vote::kFailed);
  const Tally t = round_.Count();
  if (t.yes >= core_->quorum()) {
    if (loop()->Now() >= ValidityEnd()) {
      FailAttempt(absl::DeadlineExceededError(
          "validity ran out while syncing fencing counters"));
    } else {
      Succeed();
    }
  } else if (t.yes + t.pending < core_->quorum()) {
    FailAttempt(absl::UnavailableError(absl::StrCat(
        "could not bring the fencing counters of a quorum up to date: ", status.ToString())));
  }
}

void AcquireOp::OnSyncDeadline() {
  const bool expired = loop()->Now() >= ValidityEnd();
  FailAttempt(expired ? absl::DeadlineExceededError(
                            "validity ran out while syncing fencing counters")
                      : absl::UnavailableError(
                            "fencing counters of a quorum not confirmed in time"));
}

void AcquireOp::Succeed() {
  Lease lease;
  lease.resource = resource_;
  lease.token = tokens_.token(attempt_);
  lease.fence = fence_;
  lease.ttl = ttl_;
  lease.deadline = ValidityEnd();
  succeeded_attempt_ = attempt_;
  Finish(std::move(lease));
}

// Gives the current attempt up: releases its token everywhere, then
// retries, or -- after the last attempt -- reports `status` once every
// server confirmed the release or the per-server timeout passed.
void AcquireOp::FailAttempt(absl::Status status) {
  const absl::Time now = loop()->Now();
  const absl::Duration delay = core_->RetryDelay();
  bool retry;
  if (final_) {
    retry = false;
  } else if (wait_ > absl::ZeroDuration()) {
    retry = now + delay <= call_time_ + wait_;
  } else {
    retry = retries_ < core_->options().retry_count;
  }
  if (retry) {
    ScheduleRetry(status, delay);
  } else {
    StartFinalRelease(std::move(status));
  }
}

// The last attempt failed: a round of releases. It waits for every server
// that did not time out; a straggler's release runs right after its
// acquire, so it is awaited until that acquire times out (OnStraggler).
// Servers that timed out get the release too, in the background.
void AcquireOp::StartFinalRelease(absl::Status status) {
  const size_t n = round_.size();
  absl::InlinedVector<bool, QuorumRound::kInlineServers> await(n);
  for (size_t i = 0; i < n; ++i) await[i] = round_.vote(i) != Vote::kTimedOut;
  phase_ = Phase::kReleasing;
  final_status_ = std::move(status);
  const uint32_t generation = round_.Begin(loop(), n, loop()->Now());
  for (size_t i = 0; i < n; ++i) {
    const bool sent = SendRelease(i, attempt_, await[i] ? generation : 0);
    if (!sent || !await[i]) round_.Set(i, Vote::kOut);
  }
  if (round_.Count().pending == 0) {
    Finish(final_status_);
    return;
  }
  ArmRoundDeadline(core_->Timeout(ttl_), &AcquireOp::OnFinalReleaseDeadline);
}

void AcquireOp::ScheduleRetry(const absl::Status& status, absl::Duration delay) {
  ReleaseEverywhere();
  phase_ = Phase::kWaiting;
  ++retries_;
  const absl::Time now = loop()->Now();
  AcquireWaitEvent event;
  event.policy = kPolicy;
  event.resource = resource_;
  event.attempt = attempt_;
  event.last_error = status;
  event.next_attempt_in = delay;
  event.wait_left = wait_ > absl::ZeroDuration() ? call_time_ + wait_ - now
                                                 : absl::ZeroDuration();
  // The pause is a round of no server whose deadline starts the next attempt.
  next_delay_ = delay;
  round_.Begin(loop(), 0, now);
  ArmRoundDeadline(delay, &AcquireOp::Retry);
  core_->observer()->OnAcquireWait(event);
}

void AcquireOp::Retry() {
  waited_ += next_delay_;
  StartAttempt(/*may_decide_now=*/true);
}

// The final release on server i needs no more waiting for.
void AcquireOp::Settle(size_t i) {
  if (phase_ != Phase::kReleasing || round_.vote(i) != Vote::kPending) return;
  round_.Set(i, Vote::kYes);
  if (round_.Count().pending == 0) Finish(final_status_);
}

void AcquireOp::ReleaseEverywhere() {
  for (size_t i = 0; i < core_->n(); ++i) SendRelease(i, attempt_);
}

// Releases attempt `attempt`'s token on server i; if that cannot be
// confirmed, remembers it as a leftover to release again before the next
// attempt. `track`: the final-release round that awaits it (0: none).
// Returns whether the release was sent.
bool AcquireOp::SendRelease(size_t i, int attempt, uint32_t track) {
  auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
  const absl::Time sent_at = loop()->Now();
  absl::Status sent = core_->server(i).commands->Release(
      resource_, tokens_.token(attempt), core_->Timeout(ttl_),
      [self, i, attempt, sent_at, track](absl::Status status) {
        const absl::Time now = self->loop()->Now();
        self->core_->ReportVote(self->resource_, "release", i, status, now - sent_at);
        self->core_->NoteResult(i, status);
        if (IsServerFailure(status) && self->phase_ != Phase::kDone &&
            self->tokens_.MayStillExist(attempt, now)) {
          self->tokens_.AddLeftover(i, attempt);
        }
        if (track != 0 && self->round_.IsCurrent(track)) self->Settle(i);
      });
  if (!sent.ok() && phase_ != Phase::kDone) tokens_.AddLeftover(i, attempt);
  return sent.ok();
}

void AcquireOp::ReleaseLeftovers(size_t i) {
  for (int attempt : tokens_.TakeLeftovers(i, loop()->Now())) SendRelease(i, attempt);
}

// Cancel/Shutdown: release whatever this operation may hold.
void AcquireOp::Abandon(Phase phase) {
  if (phase == Phase::kVoting || phase == Phase::kSyncing) ReleaseEverywhere();
  for (size_t i = 0; i < core_->n(); ++i) ReleaseLeftovers(i);
}

void AcquireOp::Finish(absl::StatusOr<Lease> result) {
  // Decided before both listings of one instance had answered INFO (the
  // final release waited for every server): the configuration error is the
  // real cause.
  if (!result.ok() && !core_->misconfigured().ok()) result = core_->misconfigured();
  phase_ = Phase::kDone;
  Complete(std::move(result));
}

void AcquireOp::Report(const absl::Status& status) {
  AcquireEvent event;
  event.policy = kPolicy;
  event.resource = resource_;
  event.status = status;
  event.latency = loop()->Now() - call_time_;
  event.waited = waited_;
  event.attempts = attempt_;
  event.fence = status.ok() ? fence_ : 0;
  event.ttl = status.ok() ? ttl_ : absl::ZeroDuration();
  core_->observer()->OnAcquire(event);
}

}  // namespace redlock_internal
}  // namespace dlock
