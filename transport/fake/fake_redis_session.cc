#include "dlock/transport/fake/fake_redis_session.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_pubsub.h"

namespace dlock {

FakeRedisSession::~FakeRedisSession() {
  if (hub_ != nullptr) hub_->DropSession(this);
}

std::vector<Reply> FakeRedisSession::Command(std::vector<std::string> argv) {
  if (commands_ == nullptr) return {Reply::Error("ERR FakeRedis: the server was destroyed")};
  std::optional<std::vector<Reply>> tx = Transaction(argv);
  if (tx.has_value()) return *std::move(tx);
  fake_redis_internal::CallContext ctx;
  ctx.session = this;
  ctx.session_id = id_;
  return commands_->Dispatch(ctx, std::move(argv));
}

std::optional<std::vector<Reply>> FakeRedisSession::Transaction(std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  const bool multi = absl::EqualsIgnoreCase(argv[0], "multi");
  const bool exec = absl::EqualsIgnoreCase(argv[0], "exec");
  const bool discard = absl::EqualsIgnoreCase(argv[0], "discard");
  if (!in_multi_ && !multi && !exec && !discard) return std::nullopt;
  fake_redis_internal::CallContext ctx;
  ctx.session = this;
  ctx.session_id = id_;
  if ((multi || exec || discard) && argv.size() != 1) {
    std::vector<Reply> r = {Reply::Error(absl::StrCat(
        "ERR wrong number of arguments for '", absl::AsciiStrToLower(argv[0]), "' command"))};
    if (in_multi_) multi_dirty_ = true;
    return r;
  }
  if (multi) {
    if (in_multi_) return std::vector<Reply>{Reply::Error("ERR MULTI calls can not be nested")};
    commands_->LogOnly(ctx, argv);
    in_multi_ = true;
    multi_dirty_ = false;
    multi_queue_.clear();
    return std::vector<Reply>{Reply::Status("OK")};
  }
  if (exec || discard) {
    if (!in_multi_) {
      return std::vector<Reply>{Reply::Error(
          absl::StrCat("ERR ", exec ? "EXEC" : "DISCARD", " without MULTI"))};
    }
    std::vector<std::vector<std::string>> queue = std::move(multi_queue_);
    const bool dirty = multi_dirty_;
    in_multi_ = false;
    multi_dirty_ = false;
    multi_queue_.clear();
    if (discard || dirty) commands_->LogOnly(ctx, argv);
    if (discard) return std::vector<Reply>{Reply::Status("OK")};
    if (dirty) {
      return std::vector<Reply>{
          Reply::Error("EXECABORT Transaction discarded because of previous errors.")};
    }
    // Back to back, synchronously: atomic like the real EXEC.
    std::vector<Reply> replies;
    replies.reserve(queue.size());
    for (std::vector<std::string>& cmd : queue) {
      std::vector<Reply> r = commands_->Dispatch(ctx, std::move(cmd));
      replies.push_back(std::move(r.front()));
    }
    commands_->LogOnly(ctx, argv);  // after what it ran, as the server finishes it
    return std::vector<Reply>{Reply::Array(std::move(replies))};
  }
  std::optional<Reply> error = commands_->QueueError(argv);
  if (error.has_value()) {
    multi_dirty_ = true;
    return std::vector<Reply>{*std::move(error)};
  }
  multi_queue_.push_back(std::move(argv));
  return std::vector<Reply>{Reply::Status("QUEUED")};
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
