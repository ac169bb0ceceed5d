#include "dlock/transport/subscriber_set.h"

#include <utility>

namespace dlock {

class SubscriberSet::Handle : public Subscription {
 public:
  Handle(SubscriberSet* set, uint64_t id) : set_(set), id_(id) {}
  ~Handle() override {
    if (set_ != nullptr) set_->unsubscribe_(id_);
  }
  void Detach() { set_ = nullptr; }

 private:
  SubscriberSet* set_;
  const uint64_t id_;
};

SubscriberSet::~SubscriberSet() {
  for (auto& [id, s] : subscribers_) {
    if (s.handle != nullptr) s.handle->Detach();
  }
}

std::unique_ptr<Subscription> SubscriberSet::Add(std::string channel,
                                                 MessageCallback on_message,
                                                 ReadyCallback on_ready, uint64_t* id) {
  *id = next_id_++;
  auto handle = std::make_unique<Handle>(this, *id);
  Subscriber& s = subscribers_[*id];
  s.channel = std::move(channel);
  s.on_message = std::move(on_message);
  s.on_ready = std::move(on_ready);
  s.handle = handle.get();
  return handle;
}

std::optional<std::string> SubscriberSet::Remove(uint64_t id) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return std::nullopt;
  // The handle may outlive the set now that the set no longer knows it.
  if (it->second.handle != nullptr) it->second.handle->Detach();
  std::string channel = std::move(it->second.channel);
  subscribers_.erase(it);
  return channel;
}

bool SubscriberSet::AwaitsReady(uint64_t id) const {
  auto it = subscribers_.find(id);
  return it != subscribers_.end() && it->second.on_ready != nullptr;
}

std::vector<uint64_t> SubscriberSet::AwaitingReady() const {
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : subscribers_) {
    if (s.on_ready) ids.push_back(id);
  }
  return ids;
}

SubscriberSet::ReadyCallback SubscriberSet::TakeReady(uint64_t id) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return nullptr;
  ReadyCallback cb = std::move(it->second.on_ready);
  it->second.on_ready = nullptr;
  return cb;
}

std::vector<SubscriberSet::ReadyCallback> SubscriberSet::TakeAllReady() {
  std::vector<ReadyCallback> all;
  for (auto& [id, s] : subscribers_) {
    if (!s.on_ready) continue;
    all.push_back(std::move(s.on_ready));
    s.on_ready = nullptr;
  }
  return all;
}

bool SubscriberSet::DeliverMessage(uint64_t id, absl::string_view channel,
                                   absl::string_view message) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end() || !it->second.on_message) return true;
  // Call a local copy of the callback: the subscription (or the owner) may
  // be destroyed inside it.
  MessageCallback fn = std::move(it->second.on_message);
  std::weak_ptr<int> alive = life_;
  fn(channel, message);
  if (alive.expired()) return false;
  it = subscribers_.find(id);
  if (it != subscribers_.end() && !it->second.on_message) {
    it->second.on_message = std::move(fn);
  }
  return true;
}

}  // namespace dlock
