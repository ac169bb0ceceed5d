#include "dlock/transport/fake/fake_transport.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/script.h"

namespace dlock {

FakeTransport::FakeTransport(EventLoop* loop, FakeRedis* server)
    : loop_(loop),
      server_(server),
      tasks_(loop),
      cmd_session_(server->NewSession()),
      session_id_(cmd_session_->id()),
      commands_(&tasks_, &faults_, cmd_session_.get()),
      subscriptions_(server, &tasks_, &faults_) {
  cmd_session_->SetRestartHandler([this] {
    ++epoch_;  // the server dropped the connection; the next one is new
    commands_.DropInFlight(absl::UnavailableError("FakeTransport: the server restarted"));
  });
}

FakeTransport::~FakeTransport() { Close(); }

// ---------------------------------------------------------------------------
// Commands.

absl::Status FakeTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                                 ReplyCallback callback) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  if (argv.empty()) return absl::InvalidArgumentError("FakeTransport: empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("FakeTransport: timeout must be positive");
  }
  for (const char* c : {"subscribe", "psubscribe", "unsubscribe", "punsubscribe", "monitor"}) {
    if (absl::EqualsIgnoreCase(argv[0], c)) {
      return absl::InvalidArgumentError(
          "FakeTransport: " + argv[0] + " changes the connection's protocol; use Subscribe");
    }
  }
  Log(argv);
  ++sent_serial_;
  const uint64_t id = commands_.Add(timeout, std::move(callback));
  if (faults_.partitioned()) {
    commands_.Answer(id, absl::UnavailableError("FakeTransport: partitioned"),
                     absl::ZeroDuration());
    return absl::OkStatus();
  }
  switch (faults_.TakeNext()) {
    case FakeFaultPlan::Fate::kFail:
      commands_.Answer(id, faults_.fail_outcome(),
                       faults_.request_latency() + faults_.reply_latency());
      break;
    case FakeFaultPlan::Fate::kDropRequest:
      break;  // only the timeout will answer
    case FakeFaultPlan::Fate::kDropReply:
      commands_.Apply(id, std::move(argv), /*drop_reply=*/true);
      break;
    case FakeFaultPlan::Fate::kApply:
      commands_.Apply(id, std::move(argv), /*drop_reply=*/false);
      break;
  }
  return absl::OkStatus();
}

void FakeTransport::Log(std::vector<std::string> argv) {
  if (sent_.size() >= kMaxSentLog) {
    sent_.erase(sent_.begin(), sent_.begin() + static_cast<std::ptrdiff_t>(sent_.size() / 2 + 1));
  }
  sent_.push_back(std::move(argv));
}

absl::Status FakeTransport::SendScript(absl::string_view body,
                                       absl::Span<const absl::string_view> evalsha_argv,
                                       absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  if (evalsha_argv.size() < 3) {
    return absl::InvalidArgumentError(
        "FakeTransport: a script command needs EVALSHA, sha1 and numkeys");
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("FakeTransport: timeout must be positive");
  }
  ScriptSend send;
  send.body = std::string(body);
  send.evalsha.reserve(evalsha_argv.size());
  for (absl::string_view a : evalsha_argv) send.evalsha.emplace_back(a);
  send.deadline = loop_->Now() + timeout;
  send.callback = std::move(callback);
  IssueScript(std::move(send));
  return absl::OkStatus();
}

void FakeTransport::IssueScript(ScriptSend send) {
  if (loaded_epoch_ != epoch_) {
    loaded_.clear();  // a new connection knows no script
    loaded_epoch_ = epoch_;
  }
  const std::string sha = send.evalsha[1];
  const bool load = !loaded_.contains(sha);
  if (load) Log({"SCRIPT", "LOAD", send.body});
  Log(send.evalsha);
  send.serial = ++sent_serial_;
  send.epoch = epoch_;
  std::vector<std::string> argv = send.evalsha;
  std::string body = load ? send.body : std::string();
  const absl::Duration timeout = send.deadline - loop_->Now();
  // Touches `this` only for a NOSCRIPT reply, which only the command queue
  // delivers (this transport is alive then); Close's kCancelled passes
  // straight through.
  const uint64_t id = commands_.Add(
      timeout, [this, send = std::move(send)](absl::StatusOr<Reply> reply) mutable {
        if (reply.ok() && reply->IsErrorWithPrefix("NOSCRIPT")) {
          OnNoScript(std::move(send));
          return;
        }
        std::move(send.callback)(std::move(reply));
      },
      // A NOSCRIPT read after the command timed out still tells that the
      // cache was flushed (as LinkSession::OnNoScript for the real link).
      [this, epoch = epoch_](const Reply& late) {
        if (late.IsErrorWithPrefix("NOSCRIPT") && epoch == epoch_) loaded_.clear();
      });
  if (faults_.partitioned()) {
    commands_.Answer(id, absl::UnavailableError("FakeTransport: partitioned"),
                     absl::ZeroDuration());
    return;
  }
  // The load and its EVALSHA take one fate together.
  switch (faults_.TakeNext()) {
    case FakeFaultPlan::Fate::kFail:
      commands_.Answer(id, faults_.fail_outcome(),
                       faults_.request_latency() + faults_.reply_latency());
      break;
    case FakeFaultPlan::Fate::kDropRequest:
      break;  // only the timeout will answer
    case FakeFaultPlan::Fate::kDropReply:
      if (load) loaded_.insert(sha);
      commands_.Apply(id, std::move(argv), /*drop_reply=*/true, std::move(body));
      break;
    case FakeFaultPlan::Fate::kApply:
      if (load) loaded_.insert(sha);
      commands_.Apply(id, std::move(argv), /*drop_reply=*/false, std::move(body));
      break;
  }
}

void FakeTransport::OnNoScript(ScriptSend send) {
  // The cache was flushed under this connection: nothing is known loaded.
  if (send.epoch == epoch_) loaded_.clear();
  if (!closed_ && !partitioned() && !send.resent && send.epoch == epoch_ &&
      send.serial == sent_serial_ && loop_->Now() < send.deadline) {
    // Nothing was sent after it on this connection: sending it again (load
    // + EVALSHA) keeps the order.
    send.resent = true;
    IssueScript(std::move(send));
    return;
  }
  std::move(send.callback)(absl::UnavailableError(
      absl::StrCat("FakeTransport: ", kScriptCacheFlushedMessage)));
}

absl::Status FakeTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  const uint64_t id = next_waiter_++;
  connect_waiters_[id] = std::move(callback);
  tasks_.Schedule(absl::ZeroDuration(), [this, id] {
    auto it = connect_waiters_.find(id);
    if (it == connect_waiters_.end()) return;
    auto cb = std::move(it->second);
    connect_waiters_.erase(it);
    std::move(cb)(partitioned() ? absl::UnavailableError("FakeTransport: partitioned")
                                : absl::OkStatus());
  });
  return absl::OkStatus();
}

void FakeTransport::Close() {
  if (closed_) return;
  closed_ = true;
  tasks_.CancelAll();
  std::vector<ReplyCallback> requests = commands_.TakeAll();
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  std::vector<SubscriberSet::ReadyCallback> readies = subscriptions_.Close();
  cmd_session_.reset();
  // Callbacks last: any of them may destroy this transport. They only
  // touch locals from here on.
  const absl::Status cancelled = absl::CancelledError("FakeTransport: closed");
  for (auto& cb : requests) std::move(cb)(cancelled);
  for (auto& [id, cb] : waiters) std::move(cb)(cancelled);
  for (auto& cb : readies) std::move(cb)(cancelled);
}

// ---------------------------------------------------------------------------
// Pub/sub.

absl::StatusOr<std::unique_ptr<Subscription>> FakeTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  if (!on_message) return absl::InvalidArgumentError("FakeTransport: null on_message");
  return subscriptions_.Add(std::move(channel), std::move(on_message), std::move(on_ready));
}

// ---------------------------------------------------------------------------
// Faults (the plan decides; see fake_fault_plan.h).

void FakeTransport::SetLatency(absl::Duration round_trip) { faults_.SetLatency(round_trip); }
void FakeTransport::SetLatency(absl::Duration request, absl::Duration reply) {
  faults_.SetLatency(request, reply);
}
void FakeTransport::SetSubscribeDelay(absl::Duration delay) { faults_.SetSubscribeDelay(delay); }
void FakeTransport::DropNextRequests(int n) { faults_.DropNextRequests(n); }
void FakeTransport::DropNextReplies(int n) { faults_.DropNextReplies(n); }
void FakeTransport::FailNext(int n, absl::Status status) {
  faults_.FailNext(n, std::move(status));
}
void FakeTransport::FailNextWithReply(int n, Reply reply) {
  faults_.FailNextWithReply(n, std::move(reply));
}

void FakeTransport::Partition() {
  if (closed_ || partitioned()) return;
  faults_.set_partitioned(true);
  ++epoch_;  // commands after Heal() go out on a new connection
  commands_.DropInFlight(absl::UnavailableError("FakeTransport: partitioned"));
  subscriptions_.Partition();
}

void FakeTransport::Heal() {
  if (closed_ || !partitioned()) return;
  faults_.set_partitioned(false);
  subscriptions_.Heal();
}

// ---------------------------------------------------------------------------
// Observation.

int64_t FakeTransport::CountSent(absl::string_view command) const {
  int64_t n = 0;
  for (const auto& argv : sent_) {
    if (absl::EqualsIgnoreCase(argv[0], command)) ++n;
  }
  return n;
}

int64_t FakeTransport::CountScriptRuns(absl::string_view sha1) const {
  int64_t n = 0;
  for (const auto& argv : sent_) {
    if (argv.size() < 2) continue;
    if (absl::EqualsIgnoreCase(argv[0], "evalsha") && absl::EqualsIgnoreCase(argv[1], sha1)) {
      ++n;
    } else if (absl::EqualsIgnoreCase(argv[0], "eval") &&
               absl::EqualsIgnoreCase(Sha1Hex(argv[1]), sha1)) {
      ++n;
    }
  }
  return n;
}

}  // namespace dlock
