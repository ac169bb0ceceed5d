// RedLock's Release: one round of compare-and-delete on every server,
// decided at quorum (see RELEASE in redlock.h).
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/redlock/operations.h"

namespace dlock {
namespace redlock_internal {

ReleaseOp::ReleaseOp(std::shared_ptr<Core> core, const Lease& lease,
                     StatusCallback callback)
    : QuorumOp(std::move(core), std::move(callback)),
      resource_(lease.resource),
      token_(lease.token),
      ttl_(lease.ttl) {}

void ReleaseOp::Start() {
  // From now on a late grant of this lease is released again, and Extend
  // refuses it (LATE GRANTS in redlock.h).
  core_->NoteReleased(token_, ttl_);
  const size_t n = core_->n();
  const uint32_t generation = round_.Begin(loop(), n, loop()->Now());
  const absl::Duration timeout = core_->ReleaseTimeout(ttl_);
  bool rejected = false;
  for (size_t i = 0; i < n; ++i) {
    // Checked once, by RedLock::Release.
    LeaseArgv a;
    const Server& server = core_->server(i);
    absl::Status sent =
        server.commands->ReleaseCommand(resource_, token_, a)
            .Send(*server.transport, timeout,
                  ReleaseReply{shared_from_this(), &ReleaseOp::OnRoundReply, i, nullptr,
                               generation});
    if (!sent.ok()) {
      round_.Fail(i, sent);
      rejected = true;
    }
  }
  ArmRoundDeadline(timeout, &ReleaseOp::OnDeadline);
  if (rejected) PostInRound(generation, &ReleaseOp::Evaluate);
}

void ReleaseOp::Shutdown() {
  if (!done()) CompleteLater(absl::CancelledError("RedLock destroyed"));
}

// Every reply is reported, also those that arrive after the decision.
void ReleaseOp::OnReply(uint32_t generation, size_t i, absl::Status status) {
  core_->ReportVote(resource_, "release", i, status, loop()->Now() - round_.sent_at());
  core_->run_ids().NoteResult(i, status);
  MaybeResend(i, status);
  if (!round_.IsCurrent(generation)) return;
  round_.Record(i, status);
  Evaluate();
}

// An unknown outcome (timed out, connection lost) may mean the release
// never ran: e.g. it met NOSCRIPT after a SCRIPT FLUSH with later commands
// behind it, after its callback had timed out. The compare-and-delete is
// safe to repeat (the token is this lease's alone), so it is sent again on
// that server, at most kResends times, while the key may still exist (the
// lease's ttl from this release bounds it). A background cleanup, like a
// single-server lock's: its replies are not votes (the round was decided,
// or is being decided, on the first outcomes) and are not reported.
void ReleaseOp::MaybeResend(size_t i, const absl::Status& status) {
  if (!absl::IsDeadlineExceeded(status) && !absl::IsUnavailable(status)) return;
  if (resends_.size() < core_->n()) resends_.resize(core_->n(), 0);
  if (resends_[i] >= kResends || loop()->Now() >= round_.sent_at() + ttl_) return;
  ++resends_[i];
  // Rejected (the transport is closed or down): the key expires by its TTL.
  // Resource and token were checked once, by RedLock::Release.
  LeaseArgv a;
  const Server& server = core_->server(i);
  (void)server.commands->ReleaseCommand(resource_, token_, a)
      .Send(*server.transport, core_->ReleaseTimeout(ttl_),
            ReleaseReply{shared_from_this(), &ReleaseOp::OnResendReply, i});
}

void ReleaseOp::OnRoundReply(const ReleaseReply& reply, const absl::Status& status) {
  static_cast<ReleaseOp&>(*reply.op).OnReply(static_cast<uint32_t>(reply.number), reply.server,
                                             status);
}

void ReleaseOp::OnResendReply(const ReleaseReply& reply, const absl::Status& status) {
  static_cast<ReleaseOp&>(*reply.op).MaybeResend(reply.server, status);
}

void ReleaseOp::OnDeadline() {
  round_.ExpirePending();
  Decide(/*round_over=*/true);
}

void ReleaseOp::Decide(bool /*round_over*/) {
  const Tally t = round_.Count();
  const int quorum = core_->quorum();
  // Decided at quorum: a quorum confirmed and one of them deleted the key
  // (the rest completes in the background, its votes still reported), or a
  // quorum of confirmations is impossible. Otherwise (so far only "did not
  // hold the token") wait: a straggler may still delete it.
  const bool released_by_quorum = t.yes > 0 && t.yes + t.no >= quorum;
  if (!released_by_quorum && t.pending > 0 && t.yes + t.no + t.pending >= quorum) {
    return;
  }
  if (released_by_quorum) {
    Complete(absl::OkStatus());
    return;
  }
  // A failure: say why (built only now, not on the hot path).
  std::string counts =
      absl::StrFormat("%d of %d servers released, %d did not hold the token, %d failed",
                      t.yes, t.servers, t.no, t.failed);
  if (t.pending > 0) absl::StrAppend(&counts, ", ", t.pending, " not answered yet");
  if (t.yes + t.no >= quorum) {
    Complete(absl::FailedPreconditionError(
        absl::StrCat("release: the lease no longer owns the key: ", counts)));
  } else {
    Complete(absl::UnavailableError(absl::StrCat("release: fewer than ", quorum,
                                                 " servers confirmed: ", counts,
                                                 round_.LastErrorSuffix())));
  }
}

void ReleaseOp::Report(const absl::Status& status) {
  ReleaseEvent event;
  event.policy = kPolicy;
  event.resource = resource_;
  event.status = status;
  event.latency = loop()->Now() - round_.sent_at();
  core_->observer()->OnRelease(event);
}

}  // namespace redlock_internal
}  // namespace dlock
