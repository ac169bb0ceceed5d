#include "dlock/transport/fake/fake_redis.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/fake/fake_redis_lua.h"
#include "dlock/transport/fake/fake_redis_pubsub.h"
#include "dlock/transport/script.h"

// The server core: command table, dispatch, keyspace and expiry, sessions,
// faults and inspection. The commands are in fake_redis_strings.cc,
// fake_redis_hashes.cc, fake_redis_pubsub_scripting.cc, fake_redis_server.cc.

namespace dlock {
namespace fake_redis_internal {

// Redis compares most option words as C strings: bytes after a NUL are
// ignored. Mirror that, so an argument with a NUL behaves the same.
absl::string_view CStr(const std::string& s) {
  size_t nul = s.find('\0');
  return nul == std::string::npos ? absl::string_view(s)
                                  : absl::string_view(s.data(), nul);
}

bool Is(const std::string& arg, absl::string_view word) {
  return absl::EqualsIgnoreCase(CStr(arg), word);
}

// Redis's string2ll: no spaces, no '+', no leading zeros, at most 20 bytes.
bool ParseInt64(absl::string_view s, int64_t* out) {
  if (s.empty() || s.size() >= 21) return false;
  if (s.size() == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (i == s.size()) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  unsigned long long v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = s[i] - '0';
    if (v > ULLONG_MAX / 10) return false;
    v *= 10;
    if (v > ULLONG_MAX - d) return false;
    v += d;
  }
  if (negative) {
    if (v > static_cast<unsigned long long>(LLONG_MAX) + 1) return false;
    *out = static_cast<int64_t>(0 - v);
  } else {
    if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

Reply FormatError(std::string s) { return FormatErrorReply(std::move(s)); }

// Replies Redis shares (shared.* objects).
Reply Ok() { return Reply::Status("OK"); }
Reply WrongType() {
  return Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value");
}
Reply NotInteger() { return Reply::Error("ERR value is not an integer or out of range"); }
Reply SyntaxError() { return Reply::Error("ERR syntax error"); }
Reply NoScript() { return Reply::Error("NOSCRIPT No matching script. Please use EVAL."); }
Reply ArityError(absl::string_view name) {
  return Reply::Error(absl::StrCat("ERR wrong number of arguments for '", name, "' command"));
}
Reply ExpireTimeError(absl::string_view name) {
  return Reply::Error(absl::StrCat("ERR invalid expire time in '", name, "' command"));
}

}  // namespace fake_redis_internal

namespace {

using fake_redis_internal::ArityError;
using fake_redis_internal::CStr;

std::atomic<uint64_t> g_run_id_seq{0};

}  // namespace

// ---------------------------------------------------------------------------
// Command table.

const std::vector<FakeRedis::CommandSpec>& FakeRedis::Commands() {
  static const auto* const script_subcommands = new std::vector<CommandSpec>{
      {"script|load", 3, kNoScript, &FakeRedis::CmdScriptLoad, nullptr},
      {"script|exists", -3, kNoScript, &FakeRedis::CmdScriptExists, nullptr},
      {"script|flush", -2, kNoScript | kWrite, &FakeRedis::CmdScriptFlush, nullptr},
  };
  static const auto* const commands = new std::vector<CommandSpec>{
      {"get", 2, 0, &FakeRedis::CmdGet, nullptr},
      {"set", -3, kWrite, &FakeRedis::CmdSet, nullptr},
      {"setnx", 3, kWrite, &FakeRedis::CmdSetNx, nullptr},
      {"getdel", 2, kWrite, &FakeRedis::CmdGetDel, nullptr},
      {"del", -2, kWrite, &FakeRedis::CmdDel, nullptr},
      {"exists", -2, 0, &FakeRedis::CmdExists, nullptr},
      {"type", 2, 0, &FakeRedis::CmdType, nullptr},
      {"echo", 2, 0, &FakeRedis::CmdEcho, nullptr},
      {"incr", 2, kWrite, &FakeRedis::CmdIncr, nullptr},
      {"decr", 2, kWrite, &FakeRedis::CmdDecr, nullptr},
      {"incrby", 3, kWrite, &FakeRedis::CmdIncrBy, nullptr},
      {"decrby", 3, kWrite, &FakeRedis::CmdDecrBy, nullptr},
      {"pexpire", -3, kWrite, &FakeRedis::CmdPExpire, nullptr},
      {"expire", -3, kWrite, &FakeRedis::CmdExpire, nullptr},
      {"pttl", 2, 0, &FakeRedis::CmdPTtl, nullptr},
      {"ttl", 2, 0, &FakeRedis::CmdTtl, nullptr},
      {"persist", 2, kWrite, &FakeRedis::CmdPersist, nullptr},
      {"hset", -4, kWrite, &FakeRedis::CmdHSet, nullptr},
      {"hget", 3, 0, &FakeRedis::CmdHGet, nullptr},
      {"hdel", -3, kWrite, &FakeRedis::CmdHDel, nullptr},
      {"hexists", 3, 0, &FakeRedis::CmdHExists, nullptr},
      {"hincrby", 4, kWrite, &FakeRedis::CmdHIncrBy, nullptr},
      {"hlen", 2, 0, &FakeRedis::CmdHLen, nullptr},
      {"hgetall", 2, 0, &FakeRedis::CmdHGetAll, nullptr},
      {"zadd", -4, kWrite, &FakeRedis::CmdZAdd, nullptr},
      {"zincrby", 4, kWrite, &FakeRedis::CmdZIncrBy, nullptr},
      {"zrem", -3, kWrite, &FakeRedis::CmdZRem, nullptr},
      {"zcard", 2, 0, &FakeRedis::CmdZCard, nullptr},
      {"zscore", 3, 0, &FakeRedis::CmdZScore, nullptr},
      {"zrank", 3, 0, &FakeRedis::CmdZRank, nullptr},
      {"zrange", -4, 0, &FakeRedis::CmdZRange, nullptr},
      {"zrangebyscore", -4, 0, &FakeRedis::CmdZRangeByScore, nullptr},
      {"zremrangebyscore", 4, kWrite, &FakeRedis::CmdZRemRangeByScore, nullptr},
      {"zremrangebyrank", 4, kWrite, &FakeRedis::CmdZRemRangeByRank, nullptr},
      {"zpopmin", -2, kWrite, &FakeRedis::CmdZPopMin, nullptr},
      {"publish", 3, kMayReplicate, &FakeRedis::CmdPublish, nullptr},
      {"subscribe", -2, kNoScript | kPubSubContext, &FakeRedis::CmdSubscribe, nullptr},
      {"unsubscribe", -1, kNoScript | kPubSubContext, &FakeRedis::CmdUnsubscribe, nullptr},
      {"eval", -3, kNoScript | kMayReplicate, &FakeRedis::CmdEval, nullptr},
      {"evalsha", -3, kNoScript | kMayReplicate, &FakeRedis::CmdEvalSha, nullptr},
      {"script", -2, 0, &FakeRedis::CmdScript, script_subcommands},
      {"ping", -1, kPubSubContext, &FakeRedis::CmdPing, nullptr},
      {"time", 1, 0, &FakeRedis::CmdTime, nullptr},
      {"info", -1, 0, &FakeRedis::CmdInfo, nullptr},
      {"wait", 3, kNoScript, &FakeRedis::CmdWait, nullptr},
      {"role", 1, kNoScript, &FakeRedis::CmdRole, nullptr},
      {"dbsize", 1, 0, &FakeRedis::CmdDbSize, nullptr},
      {"flushall", -1, kWrite, &FakeRedis::CmdFlushAll, nullptr},
  };
  return *commands;
}

const FakeRedis::CommandSpec* FakeRedis::Lookup(const std::vector<std::string>& argv,
                                                bool* container_miss) {
  *container_miss = false;
  const std::string name = absl::AsciiStrToLower(argv[0]);
  for (const CommandSpec& spec : Commands()) {
    if (name != spec.name) continue;
    if (spec.subcommands == nullptr || argv.size() == 1) return &spec;
    const std::string full = absl::StrCat(name, "|", absl::AsciiStrToLower(argv[1]));
    for (const CommandSpec& sub : *spec.subcommands) {
      if (full == sub.name) return &sub;
    }
    *container_miss = true;
    return nullptr;
  }
  return nullptr;
}

namespace {

bool ArityOk(int arity, size_t argc) {
  return !((arity > 0 && static_cast<size_t>(arity) != argc) ||
           (arity < 0 && argc < static_cast<size_t>(-arity)));
}

// Redis's commandCheckExistence message for an unknown command.
Reply UnknownCommand(const std::vector<std::string>& argv) {
  std::string args;
  for (size_t i = 1; i < argv.size() && args.size() < 128; ++i) {
    absl::string_view a = CStr(argv[i]);
    a = a.substr(0, 128 - args.size());
    absl::StrAppend(&args, "'", a, "' ");
  }
  std::string err = absl::StrCat("unknown command '", CStr(argv[0]).substr(0, 128),
                                 "', with args beginning with: ", args);
  for (char& c : err) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return Reply::Error(absl::StrCat("ERR ", err));
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction, clock, keyspace.

FakeRedis::FakeRedis(EventLoop* loop) : FakeRedis(loop, Options()) {}

FakeRedis::FakeRedis(EventLoop* loop, Options options)
    : loop_(loop),
      options_(options),
      loop_origin_(loop->Now()),
      pubsub_(std::make_unique<fake_redis_internal::PubSubHub>()),
      rand48_state_(kRand48Initial) {
  NewRunId();
  lua_ = std::make_unique<FakeRedisLua>(this);
}

FakeRedis::~FakeRedis() {
  // Sessions should be gone; detach any left so they do not dangle.
  pubsub_->DetachSessions();
}

void FakeRedis::NewRunId() {
  run_id_ = Sha1Hex(absl::StrCat("dlock-fake-redis-run-", g_run_id_seq.fetch_add(1), "-",
                                 reinterpret_cast<uintptr_t>(this)));
}

int64_t FakeRedis::NowMs() const {
  return absl::ToUnixMillis(options_.start_time + (loop_->Now() - loop_origin_) + jump_);
}

FakeRedis::Value* FakeRedis::Find(absl::string_view key) {
  auto it = db_.find(key);
  if (it == db_.end()) return nullptr;
  // Redis: a key is expired once now > its deadline (alive at the deadline).
  if (it->second.expire_ms != -1 && NowMs() > it->second.expire_ms) {
    db_.erase(it);
    return nullptr;
  }
  return &it->second;
}

bool FakeRedis::Delete(absl::string_view key) {
  if (Find(key) == nullptr) return false;
  db_.erase(db_.find(key));
  return true;
}

void FakeRedis::ExpireAllDue() {
  const int64_t now = NowMs();
  for (auto it = db_.begin(); it != db_.end();) {
    if (it->second.expire_ms != -1 && now > it->second.expire_ms) {
      db_.erase(it++);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------
// Faults and inspection.

void FakeRedis::Restart() {
  db_.clear();
  lua_ = std::make_unique<FakeRedisLua>(this);
  rand48_state_ = kRand48Initial;
  NewRunId();
  ++restart_count_;
  pubsub_->Restart();
}

int32_t FakeRedis::Lrand48() {
  rand48_state_ = (rand48_state_ * 0x5DEECE66Dull + 0xB) & ((1ull << 48) - 1);
  return static_cast<int32_t>(rand48_state_ >> 17);
}

void FakeRedis::Srand48(int32_t seed) {
  rand48_state_ = (static_cast<uint64_t>(static_cast<uint32_t>(seed)) << 16) | 0x330E;
}

void FakeRedis::JumpClock(absl::Duration d) { jump_ += d; }

bool FakeRedis::Evict(absl::string_view key) { return Delete(key); }

bool FakeRedis::Exists(absl::string_view key) { return Find(key) != nullptr; }

std::optional<std::string> FakeRedis::GetString(absl::string_view key) {
  Value* v = Find(key);
  if (v == nullptr || v->kind != Value::Kind::kString) return std::nullopt;
  return v->str;
}

std::optional<std::vector<std::pair<std::string, std::string>>> FakeRedis::GetHash(
    absl::string_view key) {
  Value* v = Find(key);
  if (v == nullptr || v->kind != Value::Kind::kHash) return std::nullopt;
  return v->hash;
}

int64_t FakeRedis::PTtl(absl::string_view key) {
  Value* v = Find(key);
  if (v == nullptr) return -2;
  if (v->expire_ms == -1) return -1;
  return std::max<int64_t>(0, v->expire_ms - NowMs());
}

std::vector<std::string> FakeRedis::Keys() {
  ExpireAllDue();
  std::vector<std::string> keys;
  keys.reserve(db_.size());
  for (const auto& [k, v] : db_) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

size_t FakeRedis::DbSize() {
  ExpireAllDue();
  return db_.size();
}

std::vector<std::string> FakeRedis::CachedScripts() const { return lua_->Shas(); }

size_t FakeRedis::SubscriberCount(const std::string& channel) const {
  return pubsub_->SubscriberCount(channel);
}

int64_t FakeRedis::CountInLog(absl::string_view command) const {
  int64_t n = 0;
  for (const LogEntry& e : log_) {
    if (absl::EqualsIgnoreCase(e.argv[0], command)) ++n;
  }
  return n;
}

void FakeRedis::Log(const CallContext& ctx, const std::vector<std::string>& argv) {
  if (options_.max_log_entries == 0) return;
  if (log_.size() >= options_.max_log_entries) {
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(log_.size() / 2 + 1));
  }
  log_.push_back(LogEntry{ctx.session_id, argv, ctx.from_script, NowMs()});
}

// ---------------------------------------------------------------------------
// Sessions and dispatch.

std::unique_ptr<FakeRedis::Session> FakeRedis::NewSession() {
  std::unique_ptr<Session> s(new Session(this, pubsub_->NextSessionId()));
  pubsub_->AddSession(s.get());
  return s;
}

FakeRedis::Session::~Session() {
  if (server_ != nullptr) server_->pubsub_->DropSession(this);
}

std::vector<Reply> FakeRedis::Session::Command(std::vector<std::string> argv) {
  if (server_ == nullptr) return {Reply::Error("ERR FakeRedis: the server was destroyed")};
  CallContext ctx;
  ctx.session = this;
  ctx.session_id = id_;
  return server_->Dispatch(ctx, std::move(argv));
}

void FakeRedis::Session::SetMessageHandler(
    std::function<void(const std::string&, const std::string&)> handler) {
  on_message_ = std::move(handler);
}

std::vector<Reply> FakeRedis::Session::TakeMessages() {
  std::vector<Reply> out;
  out.swap(queued_);
  return out;
}

void FakeRedis::Session::SetRestartHandler(std::function<void()> handler) {
  on_restart_ = std::move(handler);
}

void FakeRedis::Session::SubscribeDirect(const std::string& channel) {
  if (server_ != nullptr) server_->pubsub_->Subscribe(this, channel);
}

void FakeRedis::Session::UnsubscribeDirect(const std::string& channel) {
  if (server_ != nullptr) server_->pubsub_->Unsubscribe(this, channel);
}

Reply FakeRedis::Execute(std::vector<std::string> argv) {
  CallContext ctx;
  std::vector<Reply> replies = Dispatch(ctx, std::move(argv));
  return std::move(replies.front());
}

std::vector<Reply> FakeRedis::Dispatch(CallContext& ctx, std::vector<std::string> argv) {
  if (argv.empty()) return {Reply::Error("ERR FakeRedis: empty command")};
  bool container_miss = false;
  const CommandSpec* spec = Lookup(argv, &container_miss);
  if (spec == nullptr) {
    if (container_miss) {
      std::string err = absl::StrCat("unknown subcommand '", CStr(argv[1]).substr(0, 128),
                                     "'. Try ", absl::AsciiStrToUpper(argv[0]), " HELP.");
      for (char& c : err) {
        if (c == '\r' || c == '\n') c = ' ';
      }
      return {Reply::Error(absl::StrCat("ERR ", err))};
    }
    return {UnknownCommand(argv)};
  }
  if (!ArityOk(spec->arity, argv.size())) return {ArityError(spec->name)};
  // ACL (processCommand checks it after the arity, before the pub/sub
  // context): only PUBLISH and SUBSCRIBE take channels here.
  if (channels_denied_ && (std::string(spec->name) == "publish" ||
                           std::string(spec->name) == "subscribe")) {
    return {Reply::Error(
        "NOPERM this user has no permissions to access one of the channels used as "
        "arguments")};
  }
  if (ctx.session != nullptr && !ctx.session->channels_.empty() &&
      !(spec->flags & kPubSubContext)) {
    return {Reply::Error(absl::StrCat(
        "ERR Can't execute '", spec->name,
        "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed "
        "in this context"))};
  }
  Log(ctx, argv);
  std::vector<Reply> replies;
  ctx.extra = &replies;
  Reply first = (this->*(spec->handler))(ctx, argv);
  ctx.extra = nullptr;
  replies.insert(replies.begin(), std::move(first));
  return replies;
}

Reply FakeRedis::CallFromScript(CallContext& ctx, const std::vector<std::string>& argv,
                                std::string* script_error) {
  bool container_miss = false;
  const CommandSpec* spec = Lookup(argv, &container_miss);
  if (spec == nullptr) {
    *script_error = "Unknown Redis command called from script";
    return Reply();
  }
  if (!ArityOk(spec->arity, argv.size())) {
    *script_error = "Wrong number of args calling Redis command from script";
    return Reply();
  }
  if (spec->flags & kNoScript) {
    *script_error = "This Redis command is not allowed from script";
    return Reply();
  }
  // scriptVerifyACL comes before the write checks.
  if (channels_denied_ && std::string(spec->name) == "publish") {
    *script_error =
        "The user executing the script can't publish to the channel mentioned in the "
        "command";
    return Reply();
  }
  if (ctx.script_read_only && (spec->flags & (kWrite | kMayReplicate))) {
    *script_error = "Write commands are not allowed from read-only scripts.";
    return Reply();
  }
  Log(ctx, argv);
  return (this->*(spec->handler))(ctx, argv);
}

}  // namespace dlock
