#include "dlock/transport/fake/fake_subscriptions.h"

#include <algorithm>
#include <set>
#include <utility>

namespace dlock {

void FakeSubscriptions::EnsureSession() {
  if (session_ != nullptr) return;
  session_ = server_->NewSession();
  session_->SetMessageHandler([this](const std::string& channel, const std::string& message) {
    OnMessage(channel, message);
  });
  // The server dropped the connection and its subscriptions: reconnect and
  // subscribe again at once.
  session_->SetRestartHandler([this] {
    for (auto& [id, s] : states_) s.active = false;
    if (!faults_->partitioned()) ResubscribeAll();
  });
}

std::unique_ptr<Subscription> FakeSubscriptions::Add(std::string channel,
                                                     MessageCallback on_message,
                                                     SubscriberSet::ReadyCallback on_ready) {
  EnsureSession();
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      set_.Add(channel, std::move(on_message), std::move(on_ready), &id);
  State& s = states_[id];
  s.channel = std::move(channel);
  if (faults_->partitioned()) {
    ScheduleUnavailable(id, s);
  } else {
    s.activating = true;
    s.activate_task = tasks_->Schedule(
        faults_->request_latency() + faults_->subscribe_delay(), [this, id] { Activate(id); });
  }
  return handle;
}

void FakeSubscriptions::Activate(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  it->second.activate_task = 0;
  it->second.activating = false;
  session_->SubscribeDirect(it->second.channel);
  it->second.active = true;
  it->second.ready_task =
      tasks_->Schedule(faults_->reply_latency(), [this, id] { FireReady(id, absl::OkStatus()); });
}

void FakeSubscriptions::FireReady(uint64_t id, absl::Status status) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  it->second.ready_task = 0;
  SubscriberSet::ReadyCallback cb = set_.TakeReady(id);
  if (cb) std::move(cb)(std::move(status));
}

void FakeSubscriptions::ScheduleUnavailable(uint64_t id, State& s) {
  tasks_->Cancel(s.ready_task);
  s.ready_task = tasks_->Schedule(absl::ZeroDuration(), [this, id] {
    FireReady(id, absl::UnavailableError("FakeTransport: partitioned"));
  });
}

void FakeSubscriptions::Remove(uint64_t id) {
  set_.Remove(id);
  auto it = states_.find(id);
  if (it == states_.end()) return;
  tasks_->Cancel(it->second.ready_task);
  tasks_->Cancel(it->second.activate_task);
  const std::string channel = it->second.channel;
  states_.erase(it);
  if (session_ == nullptr) return;
  for (const auto& [other, s] : states_) {
    if (s.channel == channel) return;
  }
  session_->UnsubscribeDirect(channel);
}

void FakeSubscriptions::Partition() {
  if (session_ == nullptr) return;
  std::set<std::string> channels;
  for (auto& [id, s] : states_) {
    channels.insert(s.channel);
    tasks_->Cancel(s.activate_task);
    s.activate_task = 0;
    s.activating = false;
    s.active = false;
    if (set_.AwaitsReady(id)) ScheduleUnavailable(id, s);
  }
  for (const std::string& ch : channels) session_->UnsubscribeDirect(ch);
}

void FakeSubscriptions::Heal() { ResubscribeAll(); }

void FakeSubscriptions::ResubscribeAll() {
  if (session_ == nullptr) return;
  for (auto& [id, s] : states_) {
    // A subscription whose SUBSCRIBE is still on the way activates itself;
    // the others are (re)subscribed now.
    if (s.activating) continue;
    session_->SubscribeDirect(s.channel);
    s.active = true;
  }
}

void FakeSubscriptions::OnMessage(const std::string& channel, const std::string& message) {
  if (faults_->partitioned()) return;
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : states_) {
    if (s.active && s.channel == channel) ids.push_back(id);
  }
  if (ids.empty()) return;
  const absl::Time now = tasks_->loop()->Now();
  const absl::Time at = std::max(now + faults_->reply_latency(), last_push_at_);
  last_push_at_ = at;
  tasks_->Schedule(at - now, [this, ids = std::move(ids), channel, message] {
    for (uint64_t id : ids) {
      // False: the transport was destroyed inside the callback. A
      // subscription removed (or Close()d) inside is skipped by the set.
      if (!set_.DeliverMessage(id, channel, message)) return;
    }
  });
}

std::vector<SubscriberSet::ReadyCallback> FakeSubscriptions::Close() {
  std::vector<SubscriberSet::ReadyCallback> readies;
  for (auto& [id, s] : states_) {
    SubscriberSet::ReadyCallback cb = set_.TakeReady(id);
    if (cb) readies.push_back(std::move(cb));
    set_.Remove(id);
  }
  states_.clear();
  session_.reset();
  return readies;
}

}  // namespace dlock
