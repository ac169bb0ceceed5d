// PubSubChannels: see pubsub_channels.h.
#include "dlock/transport/uv/pubsub_channels.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {

using State = ReconnectingConnection::State;

std::unique_ptr<Subscription> PubSubChannels::Subscribe(
    std::string channel, MessageCallback on_message, SubscriberSet::ReadyCallback on_ready) {
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      subscribers_.Add(channel, std::move(on_message), std::move(on_ready), &id);
  std::unique_ptr<Channel>& slot = channels_[channel];
  if (slot == nullptr) slot = std::make_unique<Channel>();
  Channel& ch = *slot;
  ch.subscribers.push_back(id);
  switch (conn_->state()) {
    case State::kIdle:
      conn_->StartAttempt();
      break;
    case State::kConnecting:
      break;  // OnReady subscribes every channel
    case State::kReady:
      if (ch.confirmed && !ch.unsub_sent) {
        FireReady(id, absl::OkStatus());
      } else if (!ch.sub_sent && !ch.unsub_sent) {
        SendSubscribe(channel, true);
      }
      break;
    case State::kBackoff:
      FireReady(id, absl::UnavailableError(absl::StrCat(
                        "pub/sub not connected (retrying in the background); "
                        "last error: ",
                        conn_->last_error().message())));
      break;
  }
  return handle;
}

void PubSubChannels::FireReady(uint64_t id, absl::Status status) {
  if (!subscribers_.AwaitsReady(id)) return;
  // Runs only if the subscription still exists then; Close owes the
  // cancelled ones their kCancelled itself.
  ledger_->Defer([this, id, status = std::move(status)](bool cancelled) mutable {
    if (cancelled) return;
    SubscriberSet::ReadyCallback cb = subscribers_.TakeReady(id);
    if (cb) std::move(cb)(std::move(status));
  });
}

void PubSubChannels::SendSubscribe(const std::string& channel, bool subscribe) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  const absl::string_view argv[2] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel};
  // A closing link fails nothing here: the reconnect subscribes again.
  if (!conn_->WritePush(argv)) return;
  if (subscribe) {
    it->second->sub_sent = true;
    sent_subscribes_.push_back(channel);
  } else {
    it->second->unsub_sent = true;
  }
}

void PubSubChannels::ResetChannels() {
  sent_subscribes_.clear();
  for (auto it = channels_.begin(); it != channels_.end();) {
    Channel& ch = *it->second;
    ch.confirmed = ch.sub_sent = ch.unsub_sent = false;
    if (ch.subscribers.empty()) {
      channels_.erase(it++);
    } else {
      ++it;
    }
  }
}

void PubSubChannels::OnReady() {
  ResetChannels();
  // SendSubscribe only writes: the map does not change meanwhile.
  for (const auto& entry : channels_) SendSubscribe(entry.first, true);
}

bool PubSubChannels::OnDown(const absl::Status& why, bool was_ready) {
  for (uint64_t id : subscribers_.AwaitingReady()) FireReady(id, why);
  if (was_ready) ResetChannels();
  return !channels_.empty();
}

void PubSubChannels::OnPush(Reply reply) {
  if (reply.is_error()) {
    // The server refused the oldest unanswered SUBSCRIBE (e.g. NOPERM).
    if (sent_subscribes_.empty()) return;
    const std::string name = std::move(sent_subscribes_.front());
    sent_subscribes_.pop_front();
    auto it = channels_.find(name);
    if (it == channels_.end()) return;
    it->second->sub_sent = false;
    for (uint64_t id : it->second->subscribers) {
      FireReady(id, absl::UnavailableError(
                        absl::StrCat(*endpoint_, ": SUBSCRIBE ", name, ": ", reply.str)));
    }
    return;
  }
  if (!reply.is_array() || reply.elements.size() < 3 || !reply.elements[0].is_string() ||
      !reply.elements[1].is_string()) {
    return;
  }
  const std::string& kind = reply.elements[0].str;
  const std::string& name = reply.elements[1].str;
  auto it = channels_.find(name);
  if (kind == "subscribe" && !sent_subscribes_.empty()) sent_subscribes_.pop_front();
  if (it == channels_.end()) return;
  Channel& ch = *it->second;
  if (kind == "message") {
    if (!reply.elements[2].is_string()) return;
    auto msg = std::make_shared<std::pair<std::string, std::string>>(
        name, std::move(reply.elements[2].str));
    for (uint64_t id : ch.subscribers) {
      ledger_->Defer([this, id, msg](bool cancelled) {
        if (!cancelled) subscribers_.DeliverMessage(id, msg->first, msg->second);
      });
    }
  } else if (kind == "subscribe") {
    ch.sub_sent = false;
    ch.confirmed = true;
    for (uint64_t id : ch.subscribers) FireReady(id, absl::OkStatus());
  } else if (kind == "unsubscribe") {
    ch.unsub_sent = false;
    ch.confirmed = false;
    if (ch.subscribers.empty()) {
      if (!ch.sub_sent) channels_.erase(it);
    } else if (!ch.sub_sent) {
      SendSubscribe(name, true);  // someone subscribed again meanwhile
    }
  }
}

void PubSubChannels::Unsubscribe(uint64_t id) {
  const std::optional<std::string> channel = subscribers_.Remove(id);
  if (!channel.has_value()) return;
  auto it = channels_.find(*channel);
  if (it == channels_.end()) return;
  Channel& ch = *it->second;
  ch.subscribers.erase(std::remove(ch.subscribers.begin(), ch.subscribers.end(), id),
                       ch.subscribers.end());
  if (!ch.subscribers.empty() || closed_) return;
  if (conn_->state() == State::kReady && (ch.confirmed || ch.sub_sent)) {
    if (!ch.unsub_sent) SendSubscribe(*channel, false);
  } else if (!ch.unsub_sent) {
    channels_.erase(it);
  }
}

std::vector<SubscriberSet::ReadyCallback> PubSubChannels::Close() {
  closed_ = true;
  channels_.clear();
  sent_subscribes_.clear();
  return subscribers_.TakeAllReady();
}

}  // namespace dlock

