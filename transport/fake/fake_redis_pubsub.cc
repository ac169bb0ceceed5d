#include "dlock/transport/fake/fake_redis_pubsub.h"

#include <vector>

namespace dlock {
namespace fake_redis_internal {

void PubSubHub::DropSession(Session* s) {
  for (const std::string& ch : s->channels_) {
    auto it = channels_.find(ch);
    if (it == channels_.end()) continue;
    it->second.erase(s->id_);
    if (it->second.empty()) channels_.erase(it);
  }
  s->channels_.clear();
  sessions_.erase(s->id_);
}

void PubSubHub::DetachSessions() {
  for (auto& [id, s] : sessions_) s->server_ = nullptr;
}

void PubSubHub::Subscribe(Session* s, const std::string& channel) {
  s->channels_.insert(channel);
  channels_[channel][s->id_] = s;
}

void PubSubHub::Unsubscribe(Session* s, const std::string& channel) {
  s->channels_.erase(channel);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  it->second.erase(s->id_);
  if (it->second.empty()) channels_.erase(it);
}

int64_t PubSubHub::Publish(const std::string& channel, const std::string& message) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return 0;
  // Copy: a handler may unsubscribe or destroy sessions.
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : it->second) ids.push_back(id);
  for (uint64_t id : ids) {
    auto sit = sessions_.find(id);
    if (sit == sessions_.end() || sit->second->channels_.count(channel) == 0) continue;
    Session* s = sit->second;
    if (s->on_message_) {
      auto handler = s->on_message_;
      handler(channel, message);
    } else {
      s->queued_.push_back(Reply::Array(
          {Reply::String("message"), Reply::String(channel), Reply::String(message)}));
    }
  }
  return static_cast<int64_t>(ids.size());
}

size_t PubSubHub::SubscriberCount(const std::string& channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.size();
}

void PubSubHub::Restart() {
  channels_.clear();
  // Copy: a restart handler may destroy its session.
  std::vector<uint64_t> ids;
  for (auto& [id, s] : sessions_) {
    s->channels_.clear();
    ids.push_back(id);
  }
  for (uint64_t id : ids) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) continue;
    if (it->second->on_restart_) {
      auto handler = it->second->on_restart_;
      handler();
    }
  }
}

}  // namespace fake_redis_internal
}  // namespace dlock
