// RedLock's Extend: one round of extend-or-reacquire on every server,
// decided at quorum (see EXTEND in redlock.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/redlock/operations.h"

namespace dlock {
namespace redlock_internal {

ExtendOp::ExtendOp(std::shared_ptr<Core> core, const Lease& lease, absl::Duration ttl,
                   LeaseCallback callback)
    : QuorumOp(std::move(core), std::move(callback)), lease_(lease), ttl_(WholeMillis(ttl)) {}

ExtendOp::~ExtendOp() { Unwatch(); }

void ExtendOp::Unwatch() {
  if (!watching_) return;
  core_->Unwatch(&watch_);
  watching_ = false;
}

void ExtendOp::Start() {
  const absl::Time t1 = loop()->Now();
  const size_t n = core_->n();
  const uint32_t generation = round_.Begin(loop(), n, t1);
  if (core_->WasReleased(lease_.token)) {
    // ExtendOrReacquire would set the released key again.
    PostComplete(absl::FailedPreconditionError("extend: the lease was released"));
    return;
  }
  if (t1 >= lease_.deadline) {
    PostComplete(absl::FailedPreconditionError(
        "extend: the lease's local deadline has passed"));
    return;
  }
  const absl::Duration timeout = core_->Timeout(ttl_);
  // A Release of the lease from now on must reach what this extend does.
  watch_.token = lease_.token;
  core_->Watch(&watch_);
  watching_ = true;
  bool rejected = false;
  for (size_t i = 0; i < n; ++i) {
    const Probe probe = core_->run_ids().BeforeLockCommand(i, timeout, /*gates_votes=*/true);
    auto self = std::static_pointer_cast<ExtendOp>(shared_from_this());
    // Checked once, by RedLock::Extend.
    LeaseArgv a;
    const Server& server = core_->server(i);
    absl::Status sent =
        server.commands->ExtendOrReacquireCommand(lease_.resource, lease_.token, ttl_, a)
            .Send(*server.transport, timeout,
                  [self, generation, i, probe](absl::Status status) {
                    self->OnReply(generation, i, probe, std::move(status));
                  });
    if (sent.ok()) {
      ++outstanding_;
    } else {
      round_.Fail(i, sent);
      rejected = true;
    }
  }
  if (outstanding_ == 0) Unwatch();
  ArmRoundDeadline(std::min(timeout, lease_.deadline - t1), &ExtendOp::OnDeadline);
  if (rejected) PostInRound(generation, &ExtendOp::Evaluate);
}

void ExtendOp::Shutdown() {
  if (!done()) CompleteLater(absl::CancelledError("RedLock destroyed"));
}

void ExtendOp::OnReply(uint32_t generation, size_t i, const Probe& probe,
                       absl::Status status) {
  const absl::Time now = loop()->Now();
  core_->ReportVote(lease_.resource, "extend", i, status, now - round_.sent_at());
  core_->run_ids().NoteResult(i, status);
  --outstanding_;
  if (status.ok() && watch_.released) {
    // Released while this extend was on its way (before it or after it, or
    // overtaken by its release through a NOSCRIPT fallback): what it
    // extended or set again must not outlive the release.
    core_->ReportLateGrant(lease_.resource, "extend", kLateGrantReleased, i);
    ReleaseAgain(i);
  }
  if (outstanding_ == 0) Unwatch();
  if (!round_.IsCurrent(generation)) return;
  round_.Record(i, status,
                status.ok() && !core_->run_ids().Counted(i, now, probe) ? Vote::kUncounted
                                                                          : Vote::kYes);
  Evaluate();
}

void ExtendOp::ReleaseAgain(size_t i) {
  const absl::Time sent_at = loop()->Now();
  std::shared_ptr<Op> self = shared_from_this();
  // Rejected (the connection is closed): the key expires with its TTL.
  LeaseArgv a;
  const Server& server = core_->server(i);
  (void)server.commands->ReleaseCommand(lease_.resource, lease_.token, a)
      .Send(*server.transport, core_->Timeout(ttl_),
            ReleaseReply{std::move(self), &ExtendOp::OnReleasedAgain, i, nullptr, 0, 0, sent_at});
}

void ExtendOp::OnReleasedAgain(const ReleaseReply& reply, const absl::Status& status) {
  const ExtendOp& self = static_cast<const ExtendOp&>(*reply.op);
  Core& core = *self.core_;
  core.ReportVote(self.lease_.resource, "release", reply.server, status,
                  core.loop()->Now() - reply.sent_at);
  core.run_ids().NoteResult(reply.server, status);
}

void ExtendOp::OnDeadline() {
  round_.ExpirePending();
  Decide(/*round_over=*/true);
}

void ExtendOp::Decide(bool round_over) {
  if (!core_->run_ids().misconfigured().ok()) {
    Complete(core_->run_ids().misconfigured());
    return;
  }
  if (watch_.released) {
    Complete(absl::FailedPreconditionError(
        "extend: the lease was released while the extend was in flight"));
    return;
  }
  const absl::Time now = loop()->Now();
  const int quorum = core_->quorum();
  const Tally t = round_.Count();
  const absl::Time new_deadline = round_.sent_at() + ttl_ - core_->Drift(ttl_);
  if (t.yes >= quorum) {
    if (now >= lease_.deadline || now >= new_deadline) {
      Complete(absl::DeadlineExceededError(
          "extend: quorum reached after the lease's deadline"));
      return;
    }
    Lease lease = lease_;
    lease.ttl = ttl_;
    lease.deadline = new_deadline;
    Complete(std::move(lease));
    return;
  }
  if (t.yes + t.pending >= quorum) return;
  const std::string counts = absl::StrFormat(
      "%d of %d servers extended (need %d): %d refused (another owner), "
      "%d failed, %d not counted after a restart",
      t.yes, t.servers, quorum, t.no, t.failed, t.uncounted);
  if (round_over && now >= lease_.deadline) {
    Complete(absl::DeadlineExceededError(
        absl::StrCat("extend: the lease's deadline passed first: ", counts)));
  } else if (t.no > t.servers - quorum) {
    Complete(absl::FailedPreconditionError(
        absl::StrCat("extend: the lease no longer owns a quorum: ", counts)));
  } else {
    Complete(absl::UnavailableError(
        absl::StrCat("extend: not enough servers: ", counts, round_.LastErrorSuffix())));
  }
}

void ExtendOp::Report(const absl::Status& status) {
  ExtendEvent event;
  event.policy = kPolicy;
  event.resource = lease_.resource;
  event.status = status;
  event.latency = loop()->Now() - round_.sent_at();
  event.ttl = ttl_;
  core_->observer()->OnExtend(event);
}

}  // namespace redlock_internal
}  // namespace dlock
