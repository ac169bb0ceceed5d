#include "dlock/transport/fake/fake_transport.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "dlock/transport/script.h"

namespace dlock {

class FakeTransport::SubscriptionImpl : public Subscription {
 public:
  SubscriptionImpl(std::shared_ptr<FakeTransport*> alive, uint64_t id)
      : alive_(std::move(alive)), id_(id) {}
  ~SubscriptionImpl() override {
    if (*alive_ != nullptr) (*alive_)->RemoveSub(id_);
  }

 private:
  std::shared_ptr<FakeTransport*> alive_;
  uint64_t id_;
};

FakeTransport::FakeTransport(EventLoop* loop, FakeRedis* server)
    : loop_(loop), server_(server), alive_(std::make_shared<FakeTransport*>(this)) {
  cmd_session_ = server_->NewSession();
  session_id_ = cmd_session_->id();
  cmd_session_->SetRestartHandler([this] {
    ++epoch_;  // the server dropped the connection; the next one is new
    DropInFlight(absl::UnavailableError("FakeTransport: the server restarted"));
  });
}

FakeTransport::~FakeTransport() {
  Close();
  *alive_ = nullptr;
}

// ---------------------------------------------------------------------------
// Tasks on the loop. Every task this transport schedules is tracked, so
// Close() can cancel them all and no task outlives the transport.

uint64_t FakeTransport::Schedule(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
  const uint64_t key = next_task_++;
  const TimerId id = loop_->RunAfter(delay, [this, key, fn = std::move(fn)]() mutable {
    tasks_.erase(key);
    std::move(fn)();
  });
  tasks_[key] = id;
  return key;
}

void FakeTransport::CancelTask(uint64_t key) {
  if (key == 0) return;
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return;
  const TimerId id = it->second;
  tasks_.erase(it);
  loop_->Cancel(id);
}

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
  if (sent_.size() >= kMaxSentLog) {
    sent_.erase(sent_.begin(), sent_.begin() + static_cast<std::ptrdiff_t>(sent_.size() / 2 + 1));
  }
  sent_.push_back(argv);
  const uint64_t id = next_request_++;
  Pending& p = requests_[id];
  p.callback = std::move(callback);
  p.timeout_task = Schedule(timeout, [this, id] {
    Complete(id, absl::DeadlineExceededError("FakeTransport: no reply before the deadline"));
  });

  if (partitioned_) {
    ScheduleDelivery(id, absl::UnavailableError("FakeTransport: partitioned"),
                     absl::ZeroDuration());
    return absl::OkStatus();
  }
  if (fail_remaining_ > 0) {
    --fail_remaining_;
    ScheduleDelivery(id, fail_outcome_, request_latency_ + reply_latency_);
    return absl::OkStatus();
  }
  if (drop_requests_ > 0) {
    --drop_requests_;
    return absl::OkStatus();  // only the timeout will answer
  }
  bool drop_reply = false;
  if (drop_replies_ > 0) {
    --drop_replies_;
    drop_reply = true;
  }
  const absl::Time now = loop_->Now();
  const absl::Time apply_at = std::max(now + request_latency_, last_apply_at_);
  last_apply_at_ = apply_at;
  unapplied_[id] = Schedule(apply_at - now, [this, id, argv = std::move(argv),
                                             drop_reply]() mutable {
    Apply(id, std::move(argv), drop_reply);
  });
  return absl::OkStatus();
}

void FakeTransport::Apply(uint64_t id, std::vector<std::string> argv, bool drop_reply) {
  unapplied_.erase(id);
  std::vector<Reply> replies = cmd_session_->Command(std::move(argv));
  if (drop_reply || requests_.count(id) == 0) return;  // lost, or timed out
  ScheduleDelivery(id, std::move(replies.front()), reply_latency_);
}

void FakeTransport::ScheduleDelivery(uint64_t id, absl::StatusOr<Reply> outcome,
                                     absl::Duration delay) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const absl::Time now = loop_->Now();
  const absl::Time at = std::max(now + delay, last_deliver_at_);
  last_deliver_at_ = at;
  CancelTask(it->second.deliver_task);
  it->second.deliver_task = Schedule(at - now, [this, id, outcome = std::move(outcome)]() mutable {
    Complete(id, std::move(outcome));
  });
}

void FakeTransport::Complete(uint64_t id, absl::StatusOr<Reply> outcome) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  ReplyCallback callback = std::move(it->second.callback);
  CancelTask(it->second.timeout_task);
  CancelTask(it->second.deliver_task);
  requests_.erase(it);
  // Last: the callback may destroy this transport.
  std::move(callback)(std::move(outcome));
}

void FakeTransport::DropInFlight(const absl::Status& why) {
  for (auto& [id, task] : unapplied_) CancelTask(task);
  unapplied_.clear();
  std::vector<uint64_t> ids;
  for (auto& [id, p] : requests_) ids.push_back(id);
  for (uint64_t id : ids) ScheduleDelivery(id, why, absl::ZeroDuration());
}

absl::Status FakeTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  const uint64_t id = next_waiter_++;
  connect_waiters_[id] = std::move(callback);
  Schedule(absl::ZeroDuration(), [this, id] {
    auto it = connect_waiters_.find(id);
    if (it == connect_waiters_.end()) return;
    auto cb = std::move(it->second);
    connect_waiters_.erase(it);
    std::move(cb)(partitioned_ ? absl::UnavailableError("FakeTransport: partitioned")
                               : absl::OkStatus());
  });
  return absl::OkStatus();
}

void FakeTransport::Close() {
  if (closed_) return;
  closed_ = true;
  for (auto& [key, id] : tasks_) loop_->Cancel(id);
  tasks_.clear();
  unapplied_.clear();
  std::map<uint64_t, Pending> requests = std::move(requests_);
  requests_.clear();
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> readies;
  for (auto& [id, s] : subs_) {
    if (s.on_ready) readies.push_back(std::move(s.on_ready));
  }
  subs_.clear();
  sub_session_.reset();
  cmd_session_.reset();
  // Callbacks last: any of them may destroy this transport. They only
  // touch locals from here on.
  const absl::Status cancelled = absl::CancelledError("FakeTransport: closed");
  for (auto& [id, p] : requests) std::move(p.callback)(cancelled);
  for (auto& [id, cb] : waiters) std::move(cb)(cancelled);
  for (auto& cb : readies) std::move(cb)(cancelled);
}

// ---------------------------------------------------------------------------
// Faults and observation.

void FakeTransport::SetLatency(absl::Duration round_trip) {
  round_trip = std::max(round_trip, absl::ZeroDuration());
  const absl::Duration request = round_trip / 2;
  SetLatency(request, round_trip - request);
}

void FakeTransport::SetLatency(absl::Duration request, absl::Duration reply) {
  request_latency_ = std::max(request, absl::ZeroDuration());
  reply_latency_ = std::max(reply, absl::ZeroDuration());
}

void FakeTransport::SetSubscribeDelay(absl::Duration delay) {
  subscribe_delay_ = std::max(delay, absl::ZeroDuration());
}

void FakeTransport::DropNextRequests(int n) { drop_requests_ = std::max(n, 0); }
void FakeTransport::DropNextReplies(int n) { drop_replies_ = std::max(n, 0); }

void FakeTransport::FailNext(int n, absl::Status status) {
  if (status.ok()) status = absl::UnknownError("FakeTransport::FailNext with an OK status");
  fail_remaining_ = std::max(n, 0);
  fail_outcome_ = std::move(status);
}

void FakeTransport::FailNextWithReply(int n, Reply reply) {
  fail_remaining_ = std::max(n, 0);
  fail_outcome_ = std::move(reply);
}

void FakeTransport::Partition() {
  if (closed_ || partitioned_) return;
  partitioned_ = true;
  ++epoch_;  // commands after Heal() go out on a new connection
  DropInFlight(absl::UnavailableError("FakeTransport: partitioned"));
  if (sub_session_ == nullptr) return;
  std::set<std::string> channels;
  for (auto& [id, s] : subs_) {
    channels.insert(s.channel);
    CancelTask(s.activate_task);
    s.activate_task = 0;
    s.activating = false;
    s.active = false;
    if (s.on_ready) {
      CancelTask(s.ready_task);
      const uint64_t sid = id;
      s.ready_task = Schedule(absl::ZeroDuration(), [this, sid] {
        FireReady(sid, absl::UnavailableError("FakeTransport: partitioned"));
      });
    }
  }
  for (const std::string& ch : channels) sub_session_->UnsubscribeDirect(ch);
}

void FakeTransport::Heal() {
  if (closed_ || !partitioned_) return;
  partitioned_ = false;
  ResubscribeAll();
}

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

// ---------------------------------------------------------------------------
// Pub/sub.

void FakeTransport::EnsureSubSession() {
  if (sub_session_ != nullptr) return;
  sub_session_ = server_->NewSession();
  sub_session_->SetMessageHandler(
      [this](const std::string& channel, const std::string& message) {
        OnMessage(channel, message);
      });
  // The server dropped the connection and its subscriptions: reconnect and
  // subscribe again at once.
  sub_session_->SetRestartHandler([this] {
    for (auto& [id, s] : subs_) s.active = false;
    if (!partitioned_) ResubscribeAll();
  });
}

absl::StatusOr<std::unique_ptr<Subscription>> FakeTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("FakeTransport: closed");
  if (!on_message) return absl::InvalidArgumentError("FakeTransport: null on_message");
  EnsureSubSession();
  const uint64_t id = next_sub_++;
  Sub& s = subs_[id];
  s.channel = std::move(channel);
  s.on_message = std::make_shared<MessageCallback>(std::move(on_message));
  s.on_ready = std::move(on_ready);
  if (partitioned_) {
    s.ready_task = Schedule(absl::ZeroDuration(), [this, id] {
      FireReady(id, absl::UnavailableError("FakeTransport: partitioned"));
    });
  } else {
    s.activating = true;
    s.activate_task =
        Schedule(request_latency_ + subscribe_delay_, [this, id] { ActivateSub(id); });
  }
  return std::unique_ptr<Subscription>(new SubscriptionImpl(alive_, id));
}

void FakeTransport::ActivateSub(uint64_t id) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  it->second.activate_task = 0;
  it->second.activating = false;
  sub_session_->SubscribeDirect(it->second.channel);
  it->second.active = true;
  it->second.ready_task =
      Schedule(reply_latency_, [this, id] { FireReady(id, absl::OkStatus()); });
}

void FakeTransport::FireReady(uint64_t id, absl::Status status) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  it->second.ready_task = 0;
  if (!it->second.on_ready) return;
  auto cb = std::move(it->second.on_ready);
  it->second.on_ready = nullptr;
  std::move(cb)(std::move(status));
}

void FakeTransport::RemoveSub(uint64_t id) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  CancelTask(it->second.ready_task);
  CancelTask(it->second.activate_task);
  const std::string channel = it->second.channel;
  subs_.erase(it);
  if (sub_session_ == nullptr) return;
  for (const auto& [other, s] : subs_) {
    if (s.channel == channel) return;
  }
  sub_session_->UnsubscribeDirect(channel);
}

void FakeTransport::ResubscribeAll() {
  if (sub_session_ == nullptr) return;
  for (auto& [id, s] : subs_) {
    // A subscription whose SUBSCRIBE is still on the way activates itself;
    // the others are (re)subscribed now.
    if (s.activating) continue;
    sub_session_->SubscribeDirect(s.channel);
    s.active = true;
  }
}

void FakeTransport::OnMessage(const std::string& channel, const std::string& message) {
  if (partitioned_ || closed_) return;
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : subs_) {
    if (s.active && s.channel == channel) ids.push_back(id);
  }
  if (ids.empty()) return;
  const absl::Time now = loop_->Now();
  const absl::Time at = std::max(now + reply_latency_, last_push_at_);
  last_push_at_ = at;
  Schedule(at - now, [this, ids = std::move(ids), channel, message] {
    std::shared_ptr<FakeTransport*> alive = alive_;
    for (uint64_t id : ids) {
      auto it = subs_.find(id);
      if (it == subs_.end()) continue;
      std::shared_ptr<MessageCallback> cb = it->second.on_message;
      (*cb)(channel, message);
      if (*alive == nullptr || closed_) return;  // destroyed or closed inside the callback
    }
  });
}

}  // namespace dlock
