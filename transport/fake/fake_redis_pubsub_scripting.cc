// FakeRedis commands: pub/sub and scripting (pure move from fake_redis.cc).
#include "dlock/transport/fake/fake_redis.h"

#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/fake/fake_redis_lua.h"
#include "dlock/transport/fake/fake_redis_pubsub.h"
#include "dlock/transport/script.h"

namespace dlock {

using fake_redis_internal::ArityError;
using fake_redis_internal::NoScript;
using fake_redis_internal::NotInteger;
using fake_redis_internal::Ok;
using fake_redis_internal::ParseInt64;

// ---------------------------------------------------------------------------
// Pub/sub.

// Sessions and channels are PubSubHub's (fake_redis_pubsub.cc).

Reply FakeRedis::CmdPublish(CallContext&, const std::vector<std::string>& argv) {
  return Reply::Integer(pubsub_->Publish(argv[1], argv[2]));
}

Reply FakeRedis::CmdSubscribe(CallContext& ctx, const std::vector<std::string>& argv) {
  if (ctx.session == nullptr) {
    return Reply::Error(
        "ERR FakeRedis::Execute cannot SUBSCRIBE; use a FakeRedis::Session or "
        "FakeTransport::Subscribe");
  }
  std::vector<Reply> replies;
  for (size_t i = 1; i < argv.size(); ++i) {
    ctx.session->SubscribeDirect(argv[i]);
    replies.push_back(Reply::Array(
        {Reply::String("subscribe"), Reply::String(argv[i]),
         Reply::Integer(static_cast<int64_t>(ctx.session->channels_.size()))}));
  }
  Reply first = std::move(replies.front());
  for (size_t i = 1; i < replies.size(); ++i) ctx.extra->push_back(std::move(replies[i]));
  return first;
}

Reply FakeRedis::CmdUnsubscribe(CallContext& ctx, const std::vector<std::string>& argv) {
  if (ctx.session == nullptr) {
    return Reply::Error(
        "ERR FakeRedis::Execute cannot UNSUBSCRIBE; use a FakeRedis::Session or "
        "FakeTransport::Subscribe");
  }
  Session* s = ctx.session;
  std::vector<std::string> targets;
  if (argv.size() == 1) {
    targets.assign(s->channels_.begin(), s->channels_.end());
    if (targets.empty()) {
      return Reply::Array({Reply::String("unsubscribe"), Reply::Nil(), Reply::Integer(0)});
    }
  } else {
    targets.assign(argv.begin() + 1, argv.end());
  }
  std::vector<Reply> replies;
  for (const std::string& ch : targets) {
    s->UnsubscribeDirect(ch);
    replies.push_back(Reply::Array({Reply::String("unsubscribe"), Reply::String(ch),
                                    Reply::Integer(static_cast<int64_t>(s->channels_.size()))}));
  }
  Reply first = std::move(replies.front());
  for (size_t i = 1; i < replies.size(); ++i) ctx.extra->push_back(std::move(replies[i]));
  return first;
}

// ---------------------------------------------------------------------------
// Scripting.

Reply FakeRedis::EvalGeneric(CallContext& ctx, const std::vector<std::string>& argv,
                             bool evalsha) {
  if (evalsha && argv[1].size() != 40) return NoScript();
  int64_t numkeys;
  if (!ParseInt64(argv[2], &numkeys)) return NotInteger();
  if (numkeys > static_cast<int64_t>(argv.size()) - 3) {
    return Reply::Error("ERR Number of keys can't be greater than number of args");
  }
  if (numkeys < 0) return Reply::Error("ERR Number of keys can't be negative");
  std::string sha = evalsha ? absl::AsciiStrToLower(argv[1]) : Sha1Hex(argv[1]);
  if (!lua_->Has(sha)) {
    if (evalsha) return NoScript();
    std::string error;
    if (!lua_->Load(argv[1], &sha, &error)) return Reply::Error(error);
  }
  std::vector<std::string> keys(argv.begin() + 3, argv.begin() + 3 + numkeys);
  std::vector<std::string> args(argv.begin() + 3 + numkeys, argv.end());
  return lua_->Run(sha, ctx, keys, args);
}

Reply FakeRedis::CmdEval(CallContext& ctx, const std::vector<std::string>& argv) {
  return EvalGeneric(ctx, argv, false);
}

Reply FakeRedis::CmdEvalSha(CallContext& ctx, const std::vector<std::string>& argv) {
  return EvalGeneric(ctx, argv, true);
}

Reply FakeRedis::CmdScript(CallContext&, const std::vector<std::string>&) {
  // Only reached with argc == 1, which fails the arity check first.
  return ArityError("script");
}

Reply FakeRedis::CmdScriptLoad(CallContext&, const std::vector<std::string>& argv) {
  std::string sha, error;
  if (!lua_->Load(argv[2], &sha, &error)) return Reply::Error(error);
  return Reply::String(sha);
}

Reply FakeRedis::CmdScriptExists(CallContext&, const std::vector<std::string>& argv) {
  std::vector<Reply> out;
  for (size_t i = 2; i < argv.size(); ++i) {
    out.push_back(Reply::Integer(lua_->Has(absl::AsciiStrToLower(argv[i])) ? 1 : 0));
  }
  return Reply::Array(std::move(out));
}

Reply FakeRedis::CmdScriptFlush(CallContext&, const std::vector<std::string>& argv) {
  if (!(argv.size() == 2 || (argv.size() == 3 && (absl::EqualsIgnoreCase(argv[2], "sync") ||
                                                   absl::EqualsIgnoreCase(argv[2], "async"))))) {
    return Reply::Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
  }
  lua_ = std::make_unique<FakeRedisLua>(this);
  return Ok();
}

}  // namespace dlock
