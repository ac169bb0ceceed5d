#include "dlock/redlock/fence_sync.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/script_prelude.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace redlock_internal {

// Raises the server's (slot's) fence high-water mark KEYS[1] to ARGV[1] if
// it is lower; never lowers it. KEYS[2] is the data-set marker: a missing
// mark starts where an
// acquire would start it (lock/script_prelude.h, FENCES), so a raise never
// leaves a mark below what that server's own next acquire would have
// issued. Replies with the mark afterwards. A mark that is not an integer
// is an error (foreign data), like INCR's. Its SHA-1 is a constant, like
// lock/scripts.cc's (checked by redlock:fence_script_sha1_test against
// Sha1Hex and SCRIPT LOAD), so //redlock needs no hash code.
const Script& RaiseFenceScript() {
  static const Script* const s = new Script(DLOCK_FENCE_LAST(1, 2) R"lua(
local f = tonumber(ARGV[1])
if f == nil then
  return redis.error_reply('ERR value is not an integer or out of range')
end
if hwm < f then hwm = f end
if not stored or tonumber(stored) ~= hwm then
  redis.call('set', KEYS[1], string.format('%.0f', hwm))
end
return hwm
)lua",
                                            "c90a0af9c93a2a1c626d912d6dc069fcb947cd31");
  return *s;
}

namespace {

absl::Status RaiseStatus(const absl::StatusOr<Reply>& reply, int64_t fence) {
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) {
    return absl::UnavailableError(absl::StrCat("fence write-back: ", reply->str));
  }
  if (!reply->is_integer() || reply->integer < fence) {
    return absl::InternalError(
        absl::StrCat("unexpected reply to fence write-back: ", reply->DebugString()));
  }
  return absl::OkStatus();
}

// Sends the write-back to server i; its reply is reported, then passed to
// `then` (if any). Returns whether it was sent.
bool SendRaise(std::shared_ptr<Core> core, absl::string_view resource, absl::Duration ttl,
               int64_t fence, size_t i, absl::AnyInvocable<void(absl::Status) &&> then) {
  Core* c = core.get();
  Server& server = c->server(i);
  const absl::Time sent_at = c->loop()->Now();
  absl::Status sent = RaiseFenceScript().Run(
      *server.transport,
      {server.commands->keys().FenceHwmKey(resource), server.commands->keys().DataSetKey(resource)},
      {absl::StrCat(fence)}, c->Timeout(ttl),
      [core = std::move(core), resource = std::string(resource), fence, i, sent_at,
       then = std::move(then)](absl::StatusOr<Reply> reply) mutable {
        const absl::Status status = RaiseStatus(reply, fence);
        core->ReportVote(resource, "fence", i, status, core->loop()->Now() - sent_at);
        core->run_ids().NoteResult(i, status);
        if (then) std::move(then)(status);
      });
  if (!sent.ok()) c->run_ids().NoteResult(i, sent);
  return sent.ok();
}

}  // namespace

void FenceSync::RaiseLate(std::shared_ptr<Core> core, absl::string_view resource,
                          absl::Duration ttl, int64_t fence, size_t i) {
  SendRaise(std::move(core), resource, ttl, fence, i, nullptr);
}

FenceSync::FenceSync(std::shared_ptr<Core> core, absl::string_view resource,
                     absl::Duration ttl, int64_t fence, absl::Time validity_end, Done done)
    : core_(std::move(core)),
      resource_(resource),
      ttl_(ttl),
      fence_(fence),
      validity_end_(validity_end),
      done_(std::move(done)) {}

absl::Status FenceSync::Start(absl::Span<const int64_t> granted) {
  EventLoop* loop = core_->loop();
  const absl::Time now = loop->Now();
  const uint32_t generation = round_.Begin(loop, granted.size(), now);
  for (size_t i = 0; i < granted.size(); ++i) {
    if (granted[i] < 0) {
      round_.Set(i, Vote::kOut);
    } else if (granted[i] >= fence_) {
      round_.Set(i, Vote::kYes);
    } else {
      std::shared_ptr<FenceSync> self = shared_from_this();
      const bool sent = SendRaise(core_, resource_, ttl_, fence_, i,
                                  [self, generation, i](absl::Status status) {
                                    self->OnReply(generation, i, status);
                                  });
      if (!sent) round_.Set(i, Vote::kFailed);
    }
  }
  const Tally t = round_.Count();
  if (t.yes + t.pending < core_->quorum()) {
    round_.Close(loop);
    done_ = nullptr;
    return absl::UnavailableError(
        "could not bring the fencing counters of a quorum up to date");
  }
  std::weak_ptr<FenceSync> weak = weak_from_this();
  round_.ArmDeadline(loop, std::min(core_->Timeout(ttl_), validity_end_ - now),
                     [weak, generation] {
                       std::shared_ptr<FenceSync> self = weak.lock();
                       if (self == nullptr || !self->round_.IsCurrent(generation)) return;
                       self->round_.DeadlineFired();
                       self->OnDeadline();
                     });
  return absl::OkStatus();
}

void FenceSync::Cancel() {
  round_.Close(core_->loop());
  done_ = nullptr;
}

void FenceSync::OnReply(uint32_t generation, size_t i, const absl::Status& status) {
  if (!round_.IsCurrent(generation)) return;
  round_.Set(i, status.ok() ? Vote::kYes : Vote::kFailed);
  const Tally t = round_.Count();
  if (t.yes >= core_->quorum()) {
    End(core_->loop()->Now() >= validity_end_
            ? absl::DeadlineExceededError("validity ran out while syncing fencing counters")
            : absl::OkStatus());
  } else if (t.yes + t.pending < core_->quorum()) {
    End(absl::UnavailableError(absl::StrCat(
        "could not bring the fencing counters of a quorum up to date: ", status.ToString())));
  }
}

void FenceSync::OnDeadline() {
  End(core_->loop()->Now() >= validity_end_
          ? absl::DeadlineExceededError("validity ran out while syncing fencing counters")
          : absl::UnavailableError("fencing counters of a quorum not confirmed in time"));
}

void FenceSync::End(absl::Status status) {
  std::shared_ptr<FenceSync> self = shared_from_this();
  round_.Close(core_->loop());
  Done done = std::move(done_);
  done_ = nullptr;
  if (done) std::move(done)(std::move(status));
}

}  // namespace redlock_internal
}  // namespace dlock
