#include "dlock/transport/fake/fake_transport.h"

#include <utility>

#include "absl/strings/match.h"

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
  commands_.Dispatch(id, std::move(argv));
  return absl::OkStatus();
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
  scripts_.Send(body, evalsha_argv, timeout, std::move(callback));
  return absl::OkStatus();
}

absl::Status FakeTransport::SendTransaction(
    absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout,
    ReplyCallback callback) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  if (absl::Status s = ValidateTransaction(commands, timeout); !s.ok()) return s;
  std::vector<std::vector<std::string>> before;
  before.reserve(commands.size() + 1);
  before.push_back({"MULTI"});
  for (absl::Span<const absl::string_view> c : commands) {
    before.emplace_back(c.begin(), c.end());
  }
  for (const std::vector<std::string>& argv : before) Log(argv);
  Log({"EXEC"});
  ++sent_serial_;
  const uint64_t id = commands_.Add(timeout, std::move(callback));
  commands_.Dispatch(id, {"EXEC"}, /*load_body=*/{}, std::move(before));
  return absl::OkStatus();
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

}  // namespace dlock
