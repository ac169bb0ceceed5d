#include "dlock/transport/fake/fake_redis_pubsub.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dlock {
namespace fake_redis_internal {

std::unique_ptr<FakeRedisSession> PubSubHub::NewSession(CommandTable* commands) {
  std::unique_ptr<Session> s(new Session(commands, this, next_session_id_++));
  sessions_[s->id_] = s.get();
  return s;
}

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
  for (auto& [id, s] : sessions_) {
    s->commands_ = nullptr;
    s->hub_ = nullptr;
  }
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

std::vector<std::string> PubSubHub::ChannelsOf(const Session& s) const {
  return std::vector<std::string>(s.channels_.begin(), s.channels_.end());
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

// ---------------------------------------------------------------------------
// The commands.

void PubSubCommands::Register(CommandTable* table) {
  table->Add("publish", 3, kMayReplicate, this, &PubSubCommands::Publish);
  table->Add("subscribe", -2, kNoScript | kPubSubContext, this, &PubSubCommands::Subscribe);
  table->Add("unsubscribe", -1, kNoScript | kPubSubContext, this,
             &PubSubCommands::Unsubscribe);
}

Reply PubSubCommands::Publish(const Args& argv) {
  return Reply::Integer(hub_->Publish(argv[1], argv[2]));
}

namespace {

// Execute() runs commands as a client that cannot subscribe.
Reply NoSession(absl::string_view command) {
  return Reply::Error(absl::StrCat("ERR FakeRedis::Execute cannot ", command,
                                   "; use a FakeRedis::Session or FakeTransport::Subscribe"));
}

// (UN)SUBSCRIBE answers once per channel: the first reply is the command's,
// the others go to ctx.extra.
Reply OnePerChannel(CallContext& ctx, std::vector<Reply> replies) {
  Reply first = std::move(replies.front());
  for (size_t i = 1; i < replies.size(); ++i) ctx.extra->push_back(std::move(replies[i]));
  return first;
}

Reply CountReply(const char* kind, Reply channel, const FakeRedisSession& s) {
  return Reply::Array({Reply::String(kind), std::move(channel),
                       Reply::Integer(static_cast<int64_t>(s.subscription_count()))});
}

}  // namespace

Reply PubSubCommands::Subscribe(CallContext& ctx, const Args& argv) {
  if (ctx.session == nullptr) return NoSession("SUBSCRIBE");
  std::vector<Reply> replies;
  for (size_t i = 1; i < argv.size(); ++i) {
    ctx.session->SubscribeDirect(argv[i]);
    replies.push_back(CountReply("subscribe", Reply::String(argv[i]), *ctx.session));
  }
  return OnePerChannel(ctx, std::move(replies));
}

Reply PubSubCommands::Unsubscribe(CallContext& ctx, const Args& argv) {
  if (ctx.session == nullptr) return NoSession("UNSUBSCRIBE");
  FakeRedisSession* s = ctx.session;
  std::vector<std::string> targets;
  if (argv.size() == 1) {
    targets = hub_->ChannelsOf(*s);
    if (targets.empty()) return CountReply("unsubscribe", Reply::Nil(), *s);
  } else {
    targets.assign(argv.begin() + 1, argv.end());
  }
  std::vector<Reply> replies;
  for (const std::string& ch : targets) {
    s->UnsubscribeDirect(ch);
    replies.push_back(CountReply("unsubscribe", Reply::String(ch), *s));
  }
  return OnePerChannel(ctx, std::move(replies));
}

}  // namespace fake_redis_internal
}  // namespace dlock
