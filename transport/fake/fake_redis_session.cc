#include "dlock/transport/fake/fake_redis_session.h"

#include <utility>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_pubsub.h"

namespace dlock {

FakeRedisSession::~FakeRedisSession() {
  if (hub_ != nullptr) hub_->DropSession(this);
}

std::vector<Reply> FakeRedisSession::Command(std::vector<std::string> argv) {
  if (commands_ == nullptr) return {Reply::Error("ERR FakeRedis: the server was destroyed")};
  fake_redis_internal::CallContext ctx;
  ctx.session = this;
  ctx.session_id = id_;
  return commands_->Dispatch(ctx, std::move(argv));
}

void FakeRedisSession::SetMessageHandler(
    std::function<void(const std::string&, const std::string&)> handler) {
  on_message_ = std::move(handler);
}

std::vector<Reply> FakeRedisSession::TakeMessages() {
  std::vector<Reply> out;
  out.swap(queued_);
  return out;
}

void FakeRedisSession::SetRestartHandler(std::function<void()> handler) {
  on_restart_ = std::move(handler);
}

void FakeRedisSession::SubscribeDirect(const std::string& channel) {
  if (hub_ != nullptr) hub_->Subscribe(this, channel);
}

void FakeRedisSession::UnsubscribeDirect(const std::string& channel) {
  if (hub_ != nullptr) hub_->Unsubscribe(this, channel);
}

}  // namespace dlock
