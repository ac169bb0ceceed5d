#include "dlock/transport/fake/fake_redis_keyspace.h"

#include <algorithm>

namespace dlock {
namespace fake_redis_internal {

ServerClock::ServerClock(EventLoop* loop, absl::Time start_time)
    : loop_(loop), start_time_(start_time), loop_origin_(loop->Now()) {}

absl::Time ServerClock::Now() const { return start_time_ + Uptime() + jump_; }

absl::Duration ServerClock::Uptime() const { return loop_->Now() - loop_origin_; }

Value* Keyspace::Find(absl::string_view key) {
  auto it = db_.find(key);
  if (it == db_.end()) return nullptr;
  // Redis: a key is expired once now > its deadline (alive at the deadline).
  if (it->second.expire_ms != -1 && NowMs() > it->second.expire_ms) {
    db_.erase(it);
    return nullptr;
  }
  return &it->second;
}

bool Keyspace::Lookup(absl::string_view key, Value::Kind kind, Value** value) {
  *value = Find(key);
  return *value == nullptr || (*value)->kind == kind;
}

Value* Keyspace::Create(const std::string& key, Value::Kind kind) {
  Value& v = db_[key];
  v = Value();
  v.kind = kind;
  return &v;
}

bool Keyspace::Delete(absl::string_view key) {
  if (Find(key) == nullptr) return false;
  db_.erase(db_.find(key));
  return true;
}

int64_t Keyspace::PTtl(absl::string_view key) {
  Value* v = Find(key);
  if (v == nullptr) return -2;
  if (v->expire_ms == -1) return -1;
  return std::max<int64_t>(0, v->expire_ms - NowMs());
}

void Keyspace::ExpireAllDue() {
  const int64_t now = NowMs();
  for (auto it = db_.begin(); it != db_.end();) {
    if (it->second.expire_ms != -1 && now > it->second.expire_ms) {
      db_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> Keyspace::Keys() {
  ExpireAllDue();
  std::vector<std::string> keys;
  keys.reserve(db_.size());
  for (const auto& [k, v] : db_) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

size_t Keyspace::Size() {
  ExpireAllDue();
  return db_.size();
}

}  // namespace fake_redis_internal
}  // namespace dlock
