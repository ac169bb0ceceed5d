// HiredisTransport: pub/sub on the second connection (Subscribe, channel
// bookkeeping, SUBSCRIBE/UNSUBSCRIBE, message delivery).
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "hiredis_transport_internal.h"  // private, same directory

namespace dlock {

absl::StatusOr<std::unique_ptr<Subscription>> HiredisTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      subscribers_.Add(channel, std::move(on_message), std::move(on_ready), &id);
  auto& slot = channels_[channel];
  if (slot == nullptr) slot = std::make_unique<Channel>();
  Channel& ch = *slot;
  ch.subscribers.push_back(id);
  switch (sub_->state) {
    case Conn::State::kIdle:
      StartAttempt(*sub_);
      break;
    case Conn::State::kConnecting:
      break;  // OnReady subscribes every channel
    case Conn::State::kReady:
      if (ch.confirmed && !ch.unsub_sent) {
        FireReady(id, absl::OkStatus());
      } else if (!ch.sub_sent && !ch.unsub_sent) {
        SendSubscribe(channel, true);
      }
      break;
    case Conn::State::kBackoff:
      FireReady(id, absl::UnavailableError(absl::StrCat(
                        "pub/sub not connected (retrying in the background); "
                        "last error: ",
                        sub_->last_error.message())));
      break;
  }
  return handle;
}

void HiredisTransport::FireReady(uint64_t id, absl::Status status) {
  if (!subscribers_.AwaitsReady(id)) return;
  // Runs only if the subscription still exists then (see Deliver).
  Event e;
  e.ready_for = id;
  e.ready_status = std::move(status);
  events_.Push(std::move(e));
}

void HiredisTransport::FailPendingReady(const absl::Status& why) {
  for (uint64_t id : subscribers_.AwaitingReady()) FireReady(id, why);
}

void HiredisTransport::SendSubscribe(const std::string& channel, bool subscribe) {
  Link* link = sub_->link;
  auto it = channels_.find(channel);
  if (link == nullptr || link->ac == nullptr || it == channels_.end()) return;
  const char* argv[2] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel.data()};
  size_t lens[2] = {std::strlen(argv[0]), channel.size()};
  int rc = redisAsyncCommandArgv(
      link->ac,
      [](redisAsyncContext*, void* reply, void* privdata) {
        if (reply == nullptr) return;  // connection going away
        Link* link = static_cast<Link*>(privdata);
        link->owner->OnPubSubMessage(link, reply);
      },
      link, 2, argv, lens);
  if (rc != REDIS_OK) return;  // the context is closing; reconnect resubscribes
  if (subscribe) {
    it->second->sub_sent = true;
  } else {
    it->second->unsub_sent = true;
  }
}

void HiredisTransport::OnPubSubMessage(Link* link, void* raw_reply) {
  const redisReply* reply = static_cast<const redisReply*>(raw_reply);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
  const redisReply* kind_r = reply->element[0];
  const redisReply* name_r = reply->element[1];
  if (kind_r->type != REDIS_REPLY_STRING || name_r->type != REDIS_REPLY_STRING) return;
  const std::string kind(kind_r->str, kind_r->len);
  std::string name(name_r->str, name_r->len);
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  Channel& ch = *it->second;
  if (kind == "message") {
    const redisReply* payload_r = reply->element[2];
    if (payload_r->type != REDIS_REPLY_STRING) return;
    auto msg = std::make_shared<std::pair<std::string, std::string>>(
        name, std::string(payload_r->str, payload_r->len));
    for (uint64_t id : ch.subscribers) {
      events_.Push(FnEvent([this, id, msg](bool cancelled) {
              if (!cancelled) subscribers_.DeliverMessage(id, msg->first, msg->second);
            }));
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

void HiredisTransport::Unsubscribe(uint64_t id) {
  const std::optional<std::string> channel = subscribers_.Remove(id);
  if (!channel.has_value()) return;
  auto cit = channels_.find(*channel);
  if (cit == channels_.end()) return;
  Channel& ch = *cit->second;
  ch.subscribers.erase(std::remove(ch.subscribers.begin(), ch.subscribers.end(), id),
                       ch.subscribers.end());
  if (!ch.subscribers.empty() || closed_) return;
  if (sub_->state == Conn::State::kReady && (ch.confirmed || ch.sub_sent)) {
    if (!ch.unsub_sent) SendSubscribe(*channel, false);
  } else if (!ch.unsub_sent) {
    channels_.erase(cit);
  }
}

}  // namespace dlock
