#include "dlock/transport/uv/subscription_relay.h"

#include <utility>

namespace dlock {

class SubscriptionRelay::Handle : public Subscription {
 public:
  Handle(SubscriptionRelay* relay, uint64_t id)
      : relay_(relay), life_(relay->life_), id_(id) {}
  ~Handle() override {
    if (!life_.expired()) relay_->Remove(id_);
  }

 private:
  SubscriptionRelay* const relay_;
  std::weak_ptr<int> life_;
  const uint64_t id_;
};

std::unique_ptr<Subscription> SubscriptionRelay::Add(std::string channel,
                                                     MessageCallback on_message,
                                                     ReadyCallback on_ready, uint64_t* id) {
  *id = next_id_++;
  auto record = std::make_unique<Record>();
  record->channel = std::move(channel);
  record->on_message = std::make_shared<MessageCallback>(std::move(on_message));
  record->on_ready = std::move(on_ready);
  records_.emplace(*id, std::move(record));
  return std::make_unique<Handle>(this, *id);
}

void SubscriptionRelay::Remove(uint64_t id) {
  auto it = records_.find(id);
  if (it == records_.end()) return;
  std::unique_ptr<Record> record = std::move(it->second);
  records_.erase(it);
  // `record` (and its placement) goes here, maybe inside its own
  // on_message: node transports allow that, and the callable is shared.
}

absl::Status SubscriptionRelay::Place(uint64_t id, Transport* node, std::string address) {
  auto it = records_.find(id);
  if (it == records_.end()) return absl::NotFoundError("no such subscription");
  Record& record = *it->second;
  record.inner.reset();
  record.node = std::move(address);
  if (node == nullptr) return absl::UnavailableError("no connection to subscribe on");
  std::shared_ptr<MessageCallback> on_message = record.on_message;
  std::weak_ptr<int> life = life_;
  absl::StatusOr<std::unique_ptr<Subscription>> inner = node->Subscribe(
      record.channel,
      [on_message](absl::string_view channel, absl::string_view message) {
        std::shared_ptr<MessageCallback> keep = on_message;
        (*keep)(channel, message);
      },
      [this, life, id](absl::Status status) {
        if (!life.expired()) Ready(id, std::move(status));
      });
  if (!inner.ok()) return inner.status();
  record.inner = *std::move(inner);
  return absl::OkStatus();
}

void SubscriptionRelay::Ready(uint64_t id, absl::Status status) {
  ReadyCallback ready = TakeReady(id);
  if (ready) std::move(ready)(std::move(status));  // may destroy the relay
}

SubscriptionRelay::ReadyCallback SubscriptionRelay::TakeReady(uint64_t id) {
  auto it = records_.find(id);
  if (it == records_.end()) return nullptr;
  ReadyCallback ready = std::move(it->second->on_ready);
  it->second->on_ready = nullptr;
  return ready;
}

void SubscriptionRelay::DetachAll() {
  for (auto& [id, record] : records_) record->inner.reset();
}

std::vector<SubscriptionRelay::ReadyCallback> SubscriptionRelay::DetachAllAndTakeReady() {
  std::vector<ReadyCallback> ready;
  for (auto& [id, record] : records_) {
    record->inner.reset();
    if (record->on_ready) ready.push_back(std::move(record->on_ready));
    record->on_ready = nullptr;
  }
  return ready;
}

std::vector<uint64_t> SubscriptionRelay::UnplacedWaiting() const {
  std::vector<uint64_t> ids;
  for (const auto& [id, record] : records_) {
    if (record->on_ready && record->inner == nullptr) ids.push_back(id);
  }
  return ids;
}

std::vector<uint64_t> SubscriptionRelay::Ids() const {
  std::vector<uint64_t> ids;
  ids.reserve(records_.size());
  for (const auto& [id, record] : records_) ids.push_back(id);
  return ids;
}

const SubscriptionRelay::Record* SubscriptionRelay::Find(uint64_t id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : it->second.get();
}

bool SubscriptionRelay::Hosts(const std::string& address) const {
  for (const auto& [id, record] : records_) {
    if (record->node == address) return true;
  }
  return false;
}

}  // namespace dlock
