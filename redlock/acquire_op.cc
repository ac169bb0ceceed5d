// RedLock's Acquire: attempts of one voting round each (decided at quorum),
// the fencing write-back, retries, and the release of whatever a failed or
// abandoned attempt took (see ACQUIRE, RETRIES and FENCING in redlock.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "dlock/lock/lock_commands.h"
#include "dlock/redlock/acquire_votes.h"
#include "dlock/redlock/operations.h"

namespace dlock {
namespace redlock_internal {

// ---------------------------------------------------------------- AcquireOp

AcquireOp::AcquireOp(std::shared_ptr<Core> core, absl::string_view resource,
                     const AcquireOptions& options, LeaseCallback callback)
    : QuorumOp(std::move(core), std::move(callback)),
      resource_(resource),
      ttl_(WholeMillis(options.ttl)),
      clock_(core_->loop()->Now(), ttl_, core_->Drift(ttl_), options.wait),
      releases_(core_.get(), resource_, ttl_),
      attempts_(core_.get()) {}

namespace {

// A failure decided before both listings of one instance had answered INFO
// (the final release waited for every server): the configuration error is
// the real cause.
absl::StatusOr<Lease> WithConfigurationCause(const RunIdTracker& run_ids,
                                             absl::StatusOr<Lease> result) {
  if (!result.ok() && !run_ids.misconfigured().ok()) return run_ids.misconfigured();
  return result;
}

}  // namespace

bool AcquireOp::Cancel() { return End(/*cancel=*/true); }

void AcquireOp::Shutdown() { End(/*cancel=*/false); }

bool AcquireOp::End(bool cancel) {
  if (phase_ == Phase::kDone) return false;
  std::shared_ptr<Op> self = shared_from_this();
  const bool in_flight = phase_ == Phase::kVoting || phase_ == Phase::kSyncing;
  phase_ = Phase::kDone;
  if (in_flight) attempts_.Abandon();
  cancel ? Drop(absl::CancelledError("acquire cancelled"))
         : CompleteLater(absl::CancelledError("RedLock destroyed"));
  // Release whatever this operation may hold.
  if (sync_ != nullptr) {
    sync_->Cancel();
    sync_.reset();
  }
  releases_.Abandon(self, in_flight ? attempts_.current() : 0);
  return true;
}

void AcquireOp::StartAttempt(bool may_decide_now) {
  phase_ = Phase::kVoting;
  const int attempt = attempts_.Begin();
  const absl::Time t0 = loop()->Now();
  clock_.BeginAttempt(t0);
  const size_t n = core_->n();
  const absl::Duration timeout = core_->Timeout(ttl_);
  // However late a request of this attempt is applied, its key is gone by
  // then (best effort: a request delayed longer in the network could
  // outlive it; such a key still expires by itself).
  const std::string& token = releases_.Draw(attempt, t0, t0 + 2 * timeout + ttl_);
  const uint32_t generation = round_.Begin(loop(), n, t0);
  bool rejected = false;
  for (size_t i = 0; i < n; ++i) {
    // Leftovers of earlier attempts first: same connection, so the server
    // deletes them before it sees this attempt's acquire.
    releases_.SendLeftovers(shared_from_this(), i);
    // The run_id is probed (when due) only to tell one instance listed
    // twice; a young data set refuses inside the acquire script.
    core_->run_ids().BeforeLockCommand(i, timeout, /*gates_votes=*/false);
    auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
    // Checked once, by RedLock::Acquire (and its options by Create).
    LeaseArgv a;
    const Server& server = core_->server(i);
    absl::Status sent =
        server.commands
            ->AcquireCommand(resource_, token, ttl_, core_->run_ids().RestartWindow(), a,
                             core_->options().fencing)
            .Send(*server.transport, timeout,
                  [self, attempt, generation, i](absl::StatusOr<int64_t> fence) {
                    self->OnAcquireReply(attempt, generation, i, std::move(fence));
                  });
    if (sent.ok()) {
      attempts_.Sent();
    } else {
      round_.Fail(i, sent);
      core_->run_ids().NoteResult(i, sent);
      rejected = true;
    }
  }
  ArmRoundDeadline(clock_.VotingTime(timeout), &AcquireOp::OnVotingDeadline);
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
  core_->ReportVote(resource_, "acquire", i, fence.status(), now - releases_.sent_at(attempt));
  core_->run_ids().NoteResult(i, fence.status());
  attempts_.Replied(attempt);
  if (!round_.IsCurrent(generation) || phase_ != Phase::kVoting) {
    OnStraggler(attempt, i, fence);
    attempts_.UnwatchWhenSettled();
    return;
  }
  if (CountAcquireAnswer(round_, i, fence)) core_->run_ids().NoteYoung(i, fence.status());
  Evaluate();
}

// A reply after its attempt was decided. A grant is kept only while it can
// still serve its lease: the attempt that succeeded, as long as the lease was
// not released, or the current attempt while its fence is being synced.
// Every other grant is released again (LATE GRANTS in redlock.h): of a
// released lease, of an attempt that lost, of one abandoned by Cancel or
// Shutdown.
void AcquireOp::OnStraggler(int attempt, size_t i, const absl::StatusOr<int64_t>& fence) {
  const bool current = attempt == attempts_.current();
  const absl::string_view reason =  // empty: kept
      attempts_.LateGrantReason(attempt, phase_ == Phase::kSyncing);
  if (releases_.OnLateReply(shared_from_this(), i, attempt, fence, reason,
                            /*final=*/current && phase_ == Phase::kReleasing) &&
      *fence < fence_) {
    // A late grant of the lease with a lagging counter: raise it too, so the
    // counters converge (not needed for the guarantee, which rests on the
    // quorum confirmed before success).
    FenceSync::RaiseLate(core_, resource_, ttl_, fence_, i);
  }
}

void AcquireOp::OnVotingDeadline() {
  round_.ExpirePending();
  Decide(/*round_over=*/true);
}

// Decides the voting round if its outcome is known.
void AcquireOp::Decide(bool round_over) {
  if (phase_ != Phase::kVoting) return;
  if (!core_->run_ids().misconfigured().ok()) {
    final_ = true;
    FailAttempt(core_->run_ids().misconfigured());
    return;
  }
  AttemptDecision d = DecideAttempt(round_, core_->quorum(), clock_, loop()->Now(), round_over);
  if (d.kind == AttemptDecision::kGranted) {
    StartFenceSync();
  } else if (d.kind == AttemptDecision::kFailed) {
    FailAttempt(std::move(d.failure));
  }
}

// Makes a quorum of the granting servers hold a fencing counter >= the
// lease's fence (see FENCING in redlock.h); usually nothing to do.
void AcquireOp::StartFenceSync() {
  phase_ = Phase::kSyncing;
  round_.Close(loop());  // its votes stay readable (StartFinalRelease)
  const Grants grants = CollectGrants(round_);
  fence_ = grants.fence;
  if (grants.confirmed >= core_->quorum()) {
    Succeed();
    return;
  }
  auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
  sync_ = std::make_shared<FenceSync>(
      core_, resource_, ttl_, fence_, clock_.ValidityEnd(),
      [self, attempt = attempts_.current()](absl::Status status) {
        self->OnSynced(attempt, std::move(status));
      });
  absl::Status started = sync_->Start(grants.granted);
  if (!started.ok()) {
    sync_.reset();
    FailAttempt(std::move(started));
  }
}

void AcquireOp::OnSynced(int attempt, absl::Status status) {
  if (attempt != attempts_.current() || phase_ != Phase::kSyncing) return;
  sync_.reset();
  if (status.ok()) {
    Succeed();
  } else {
    FailAttempt(std::move(status));
  }
}

void AcquireOp::Succeed() {
  Lease lease;
  lease.resource = resource_;
  lease.token = releases_.token(attempts_.current());
  lease.fence = fence_;
  lease.ttl = ttl_;
  lease.deadline = clock_.ValidityEnd();
  attempts_.Succeeded(releases_.token(attempts_.current()));
  Finish(std::move(lease));
}

// Gives the current attempt up: releases its token everywhere, then
// retries, or -- after the last attempt -- reports `status` once every
// server confirmed the release or the per-server timeout passed.
void AcquireOp::FailAttempt(absl::Status status) {
  const absl::Duration delay = core_->RetryDelay();
  if (clock_.MayRetry(final_, loop()->Now(), delay, core_->options().retry_count)) {
    ScheduleRetry(status, delay);
  } else {
    StartFinalRelease(std::move(status));
  }
}

// The last attempt failed: its release everywhere, awaited on every server
// that did not time out; a straggler's release runs right after its
// acquire, so it is awaited until that acquire times out (OnStraggler).
// Servers that timed out get the release too, in the background.
void AcquireOp::StartFinalRelease(absl::Status status) {
  const size_t n = round_.size();
  absl::InlinedVector<bool, QuorumRound::kInlineServers> await(n);
  for (size_t i = 0; i < n; ++i) await[i] = round_.vote(i) != Vote::kTimedOut;
  round_.Close(loop());
  phase_ = Phase::kReleasing;
  final_status_ = std::move(status);
  auto self = std::static_pointer_cast<AcquireOp>(shared_from_this());
  const bool awaiting = releases_.StartFinal(self, attempts_.current(), await, [self] {
    if (self->phase_ == Phase::kReleasing) self->Finish(self->final_status_);
  });
  if (!awaiting) Finish(final_status_);
}

void AcquireOp::ScheduleRetry(const absl::Status& status, absl::Duration delay) {
  releases_.SendEverywhere(shared_from_this(), attempts_.current());
  phase_ = Phase::kWaiting;
  const absl::Time now = loop()->Now();
  const AcquireWaitEvent event = clock_.Pause(resource_, attempts_.current(), status, delay, now);
  // The pause is a round of no server whose deadline starts the next attempt.
  round_.Begin(loop(), 0, now);
  ArmRoundDeadline(delay, &AcquireOp::Retry);
  core_->observer()->OnAcquireWait(event);
}

void AcquireOp::Retry() {
  clock_.Resume();
  StartAttempt(/*may_decide_now=*/true);
}

void AcquireOp::Finish(absl::StatusOr<Lease> result) {
  result = WithConfigurationCause(core_->run_ids(), std::move(result));
  phase_ = Phase::kDone;
  releases_.Close();
  Complete(std::move(result));
}

void AcquireOp::Report(const absl::Status& status) {
  core_->observer()->OnAcquire(
      clock_.Outcome(resource_, status, loop()->Now(), attempts_.current(), fence_));
}

}  // namespace redlock_internal
}  // namespace dlock
