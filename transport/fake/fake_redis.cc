#include "dlock/transport/fake/fake_redis.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/fake/fake_redis_lua.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

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
      {"publish", 3, kMayReplicate, &FakeRedis::CmdPublish, nullptr},
      {"subscribe", -2, kNoScript | kPubSubContext, &FakeRedis::CmdSubscribe, nullptr},
      {"unsubscribe", -1, kNoScript | kPubSubContext, &FakeRedis::CmdUnsubscribe, nullptr},
      {"eval", -3, kNoScript | kMayReplicate, &FakeRedis::CmdEval, nullptr},
      {"evalsha", -3, kNoScript | kMayReplicate, &FakeRedis::CmdEvalSha, nullptr},
      {"script", -2, 0, &FakeRedis::CmdScript, script_subcommands},
      {"ping", -1, kPubSubContext, &FakeRedis::CmdPing, nullptr},
      {"time", 1, 0, &FakeRedis::CmdTime, nullptr},
      {"info", -1, 0, &FakeRedis::CmdInfo, nullptr},
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
      rand48_state_(kRand48Initial) {
  NewRunId();
  lua_ = std::make_unique<FakeRedisLua>(this);
}

FakeRedis::~FakeRedis() {
  // Sessions should be gone; detach any left so they do not dangle.
  for (auto& [id, s] : sessions_) s->server_ = nullptr;
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
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.size();
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
  const uint64_t id = next_session_id_++;
  std::unique_ptr<Session> s(new Session(this, id));
  sessions_[id] = s.get();
  return s;
}

void FakeRedis::DropSession(Session* s) {
  for (const std::string& ch : s->channels_) {
    auto it = channels_.find(ch);
    if (it == channels_.end()) continue;
    it->second.erase(s->id_);
    if (it->second.empty()) channels_.erase(it);
  }
  s->channels_.clear();
  sessions_.erase(s->id_);
}

FakeRedis::Session::~Session() {
  if (server_ != nullptr) server_->DropSession(this);
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
  if (server_ == nullptr) return;
  channels_.insert(channel);
  server_->channels_[channel][id_] = this;
}

void FakeRedis::Session::UnsubscribeDirect(const std::string& channel) {
  if (server_ == nullptr) return;
  channels_.erase(channel);
  auto it = server_->channels_.find(channel);
  if (it == server_->channels_.end()) return;
  it->second.erase(id_);
  if (it->second.empty()) server_->channels_.erase(it);
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

// ---------------------------------------------------------------------------
// Strings.

Reply FakeRedis::CmdGet(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Nil();
  if (v->kind != Value::Kind::kString) return WrongType();
  return Reply::String(v->str);
}

Reply FakeRedis::CmdSet(CallContext&, const std::vector<std::string>& argv) {
  enum : int {
    NX = 1, XX = 2, EX = 4, PX = 8, KEEPTTL = 16, GET = 32, EXAT = 64, PXAT = 128
  };
  int flags = 0;
  const std::string* expire = nullptr;
  bool seconds = true;
  for (size_t j = 3; j < argv.size(); ++j) {
    const std::string& opt = argv[j];
    const bool has_next = j + 1 < argv.size();
    if (Is(opt, "nx") && !(flags & XX)) {
      flags |= NX;
    } else if (Is(opt, "xx") && !(flags & NX)) {
      flags |= XX;
    } else if (Is(opt, "get")) {
      flags |= GET;
    } else if (Is(opt, "keepttl") && !(flags & (EX | EXAT | PX | PXAT))) {
      flags |= KEEPTTL;
    } else if (Is(opt, "ex") && !(flags & (KEEPTTL | EXAT | PX | PXAT)) && has_next) {
      flags |= EX;
      expire = &argv[++j];
    } else if (Is(opt, "px") && !(flags & (KEEPTTL | EX | EXAT | PXAT)) && has_next) {
      flags |= PX;
      seconds = false;
      expire = &argv[++j];
    } else if (Is(opt, "exat") && !(flags & (KEEPTTL | EX | PX | PXAT)) && has_next) {
      flags |= EXAT;
      expire = &argv[++j];
    } else if (Is(opt, "pxat") && !(flags & (KEEPTTL | EX | EXAT | PX)) && has_next) {
      flags |= PXAT;
      seconds = false;
      expire = &argv[++j];
    } else {
      return SyntaxError();
    }
  }
  // When EX and PX both appear, Redis keeps the unit of the last one parsed
  // (each check excludes the other), so `seconds` above is already right.
  int64_t ms = 0;
  if (expire != nullptr) {
    if (!ParseInt64(*expire, &ms)) return NotInteger();
    if (ms <= 0 || (seconds && ms > LLONG_MAX / 1000)) return ExpireTimeError("set");
    if (seconds) ms *= 1000;
    if (flags & (EX | PX)) {
      int64_t sum;
      if (__builtin_add_overflow(ms, NowMs(), &sum)) return ExpireTimeError("set");
      ms = sum;
    }
    if (ms <= 0) return ExpireTimeError("set");
  }
  Reply get_reply;
  Value* old = Find(argv[1]);
  if (flags & GET) {
    if (old != nullptr) {
      if (old->kind != Value::Kind::kString) return WrongType();
      get_reply = Reply::String(old->str);
    }
  }
  const bool found = old != nullptr;
  if (((flags & NX) && found) || ((flags & XX) && !found)) {
    return (flags & GET) ? get_reply : Reply::Nil();
  }
  const int64_t keep = (found && (flags & KEEPTTL)) ? old->expire_ms : -1;
  Value& v = db_[argv[1]];
  v = Value();
  v.kind = Value::Kind::kString;
  v.str = argv[2];
  v.expire_ms = keep;
  if (expire != nullptr) v.expire_ms = ms;
  return (flags & GET) ? get_reply : Ok();
}

Reply FakeRedis::CmdSetNx(CallContext&, const std::vector<std::string>& argv) {
  if (Find(argv[1]) != nullptr) return Reply::Integer(0);
  Value& v = db_[argv[1]];
  v = Value();
  v.str = argv[2];
  return Reply::Integer(1);
}

Reply FakeRedis::CmdGetDel(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Nil();
  if (v->kind != Value::Kind::kString) return WrongType();
  Reply r = Reply::String(v->str);
  db_.erase(db_.find(argv[1]));
  return r;
}

Reply FakeRedis::CmdDel(CallContext&, const std::vector<std::string>& argv) {
  int64_t n = 0;
  for (size_t i = 1; i < argv.size(); ++i) n += Delete(argv[i]) ? 1 : 0;
  return Reply::Integer(n);
}

Reply FakeRedis::CmdExists(CallContext&, const std::vector<std::string>& argv) {
  int64_t n = 0;
  for (size_t i = 1; i < argv.size(); ++i) n += Find(argv[i]) != nullptr ? 1 : 0;
  return Reply::Integer(n);
}

Reply FakeRedis::CmdType(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Status("none");
  return Reply::Status(v->kind == Value::Kind::kString ? "string" : "hash");
}

Reply FakeRedis::CmdEcho(CallContext&, const std::vector<std::string>& argv) {
  return Reply::String(argv[1]);
}

Reply FakeRedis::IncrDecr(const std::string& key, int64_t by) {
  Value* v = Find(key);
  int64_t value = 0;
  if (v != nullptr) {
    if (v->kind != Value::Kind::kString) return WrongType();
    if (!ParseInt64(v->str, &value)) return NotInteger();
  }
  int64_t result;
  if (__builtin_add_overflow(value, by, &result)) {
    return Reply::Error("ERR increment or decrement would overflow");
  }
  if (v == nullptr) {
    v = &db_[key];
    *v = Value();
  }
  v->str = absl::StrCat(result);  // the TTL is kept, as in Redis
  return Reply::Integer(result);
}

Reply FakeRedis::CmdIncr(CallContext&, const std::vector<std::string>& argv) {
  return IncrDecr(argv[1], 1);
}

Reply FakeRedis::CmdDecr(CallContext&, const std::vector<std::string>& argv) {
  return IncrDecr(argv[1], -1);
}

Reply FakeRedis::CmdIncrBy(CallContext&, const std::vector<std::string>& argv) {
  int64_t by;
  if (!ParseInt64(argv[2], &by)) return NotInteger();
  return IncrDecr(argv[1], by);
}

Reply FakeRedis::CmdDecrBy(CallContext&, const std::vector<std::string>& argv) {
  int64_t by;
  if (!ParseInt64(argv[2], &by)) return NotInteger();
  if (by == LLONG_MIN) return Reply::Error("ERR decrement would overflow");
  return IncrDecr(argv[1], -by);
}

// ---------------------------------------------------------------------------
// Expiry.

Reply FakeRedis::ExpireGeneric(const std::vector<std::string>& argv, bool seconds) {
  const char* name = seconds ? "expire" : "pexpire";
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t j = 3; j < argv.size(); ++j) {
    if (Is(argv[j], "nx")) {
      nx = true;
    } else if (Is(argv[j], "xx")) {
      xx = true;
    } else if (Is(argv[j], "gt")) {
      gt = true;
    } else if (Is(argv[j], "lt")) {
      lt = true;
    } else {
      return FormatError(absl::StrCat("Unsupported option ", CStr(argv[j])));
    }
  }
  if ((nx && xx) || (nx && gt) || (nx && lt)) {
    return Reply::Error("ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if (gt && lt) return Reply::Error("ERR GT and LT options at the same time are not compatible");

  int64_t when;
  if (!ParseInt64(argv[2], &when)) return NotInteger();
  if (seconds) {
    if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) return ExpireTimeError(name);
    when *= 1000;
  }
  const int64_t now = NowMs();
  if (when > LLONG_MAX - now) return ExpireTimeError(name);
  when += now;

  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Integer(0);
  const int64_t current = v->expire_ms;
  if (nx && current != -1) return Reply::Integer(0);
  if (xx && current == -1) return Reply::Integer(0);
  if (gt && (when <= current || current == -1)) return Reply::Integer(0);
  if (lt && current != -1 && when >= current) return Reply::Integer(0);
  if (when <= now) {
    db_.erase(db_.find(argv[1]));
    return Reply::Integer(1);
  }
  v->expire_ms = when;
  return Reply::Integer(1);
}

Reply FakeRedis::CmdPExpire(CallContext&, const std::vector<std::string>& argv) {
  return ExpireGeneric(argv, false);
}

Reply FakeRedis::CmdExpire(CallContext&, const std::vector<std::string>& argv) {
  return ExpireGeneric(argv, true);
}

Reply FakeRedis::TtlGeneric(const std::string& key, bool ms) {
  Value* v = Find(key);
  if (v == nullptr) return Reply::Integer(-2);
  if (v->expire_ms == -1) return Reply::Integer(-1);
  int64_t ttl = std::max<int64_t>(0, v->expire_ms - NowMs());
  return Reply::Integer(ms ? ttl : (ttl + 500) / 1000);
}

Reply FakeRedis::CmdPTtl(CallContext&, const std::vector<std::string>& argv) {
  return TtlGeneric(argv[1], true);
}

Reply FakeRedis::CmdTtl(CallContext&, const std::vector<std::string>& argv) {
  return TtlGeneric(argv[1], false);
}

Reply FakeRedis::CmdPersist(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr || v->expire_ms == -1) return Reply::Integer(0);
  v->expire_ms = -1;
  return Reply::Integer(1);
}

// ---------------------------------------------------------------------------
// Hashes (fields kept in insertion order, like a listpack).

namespace {

using HashFields = std::vector<std::pair<std::string, std::string>>;

HashFields::iterator FindField(HashFields& h, const std::string& field) {
  return std::find_if(h.begin(), h.end(), [&](const auto& p) { return p.first == field; });
}

}  // namespace

Reply FakeRedis::CmdHSet(CallContext&, const std::vector<std::string>& argv) {
  if (argv.size() % 2 == 1) return ArityError("hset");
  Value* v = Find(argv[1]);
  if (v != nullptr && v->kind != Value::Kind::kHash) return WrongType();
  if (v == nullptr) {
    v = &db_[argv[1]];
    *v = Value();
    v->kind = Value::Kind::kHash;
  }
  int64_t created = 0;
  for (size_t i = 2; i + 1 < argv.size(); i += 2) {
    auto it = FindField(v->hash, argv[i]);
    if (it == v->hash.end()) {
      v->hash.emplace_back(argv[i], argv[i + 1]);
      ++created;
    } else {
      it->second = argv[i + 1];
    }
  }
  return Reply::Integer(created);
}

Reply FakeRedis::CmdHGet(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Nil();
  if (v->kind != Value::Kind::kHash) return WrongType();
  auto it = FindField(v->hash, argv[2]);
  if (it == v->hash.end()) return Reply::Nil();
  return Reply::String(it->second);
}

Reply FakeRedis::CmdHDel(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Integer(0);
  if (v->kind != Value::Kind::kHash) return WrongType();
  int64_t deleted = 0;
  for (size_t i = 2; i < argv.size(); ++i) {
    auto it = FindField(v->hash, argv[i]);
    if (it == v->hash.end()) continue;
    v->hash.erase(it);
    ++deleted;
    if (v->hash.empty()) {
      db_.erase(db_.find(argv[1]));
      break;
    }
  }
  return Reply::Integer(deleted);
}

Reply FakeRedis::CmdHExists(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Integer(0);
  if (v->kind != Value::Kind::kHash) return WrongType();
  return Reply::Integer(FindField(v->hash, argv[2]) != v->hash.end() ? 1 : 0);
}

Reply FakeRedis::CmdHIncrBy(CallContext&, const std::vector<std::string>& argv) {
  int64_t by;
  if (!ParseInt64(argv[3], &by)) return NotInteger();
  Value* v = Find(argv[1]);
  if (v != nullptr && v->kind != Value::Kind::kHash) return WrongType();
  int64_t value = 0;
  HashFields::iterator it;
  if (v != nullptr && (it = FindField(v->hash, argv[2])) != v->hash.end()) {
    if (!ParseInt64(it->second, &value)) return Reply::Error("ERR hash value is not an integer");
  }
  int64_t result;
  if (__builtin_add_overflow(value, by, &result)) {
    return Reply::Error("ERR increment or decrement would overflow");
  }
  if (v == nullptr) {
    v = &db_[argv[1]];
    *v = Value();
    v->kind = Value::Kind::kHash;
  }
  it = FindField(v->hash, argv[2]);
  if (it == v->hash.end()) {
    v->hash.emplace_back(argv[2], absl::StrCat(result));
  } else {
    it->second = absl::StrCat(result);
  }
  return Reply::Integer(result);
}

Reply FakeRedis::CmdHLen(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Integer(0);
  if (v->kind != Value::Kind::kHash) return WrongType();
  return Reply::Integer(static_cast<int64_t>(v->hash.size()));
}

Reply FakeRedis::CmdHGetAll(CallContext&, const std::vector<std::string>& argv) {
  Value* v = Find(argv[1]);
  if (v == nullptr) return Reply::Array({});
  if (v->kind != Value::Kind::kHash) return WrongType();
  std::vector<Reply> out;
  out.reserve(v->hash.size() * 2);
  for (const auto& [f, val] : v->hash) {
    out.push_back(Reply::String(f));
    out.push_back(Reply::String(val));
  }
  return Reply::Array(std::move(out));
}

// ---------------------------------------------------------------------------
// Pub/sub.

void FakeRedis::Publish(const std::string& channel, const std::string& message,
                        int64_t* receivers) {
  *receivers = 0;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  // Copy: a handler may unsubscribe or destroy sessions.
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : it->second) ids.push_back(id);
  *receivers = static_cast<int64_t>(ids.size());
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
}

Reply FakeRedis::CmdPublish(CallContext&, const std::vector<std::string>& argv) {
  int64_t n = 0;
  Publish(argv[1], argv[2], &n);
  return Reply::Integer(n);
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

// ---------------------------------------------------------------------------
// Server.

Reply FakeRedis::CmdPing(CallContext& ctx, const std::vector<std::string>& argv) {
  if (argv.size() > 2) return ArityError("ping");
  if (ctx.session != nullptr && !ctx.session->channels_.empty()) {
    return Reply::Array(
        {Reply::String("pong"), Reply::String(argv.size() == 1 ? "" : argv[1])});
  }
  if (argv.size() == 1) return Reply::Status("PONG");
  return Reply::String(argv[1]);
}

Reply FakeRedis::CmdTime(CallContext&, const std::vector<std::string>&) {
  const int64_t us =
      absl::ToUnixMicros(options_.start_time + (loop_->Now() - loop_origin_) + jump_);
  int64_t sec = us / 1000000, usec = us % 1000000;
  if (usec < 0) {
    usec += 1000000;
    --sec;
  }
  return Reply::Array({Reply::String(absl::StrCat(sec)), Reply::String(absl::StrCat(usec))});
}

Reply FakeRedis::CmdInfo(CallContext&, const std::vector<std::string>& argv) {
  bool server = argv.size() == 1;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (Is(argv[i], "server") || Is(argv[i], "default") || Is(argv[i], "all") ||
        Is(argv[i], "everything")) {
      server = true;
    }
  }
  if (!server) return Reply::String("");
  const int64_t uptime_ms = absl::ToInt64Milliseconds(loop_->Now() - loop_origin_);
  return Reply::String(absl::StrCat(
      "# Server\r\n", "redis_version:7.0.15\r\n", "redis_mode:standalone\r\n",
      "os:dlock FakeRedis\r\n", "arch_bits:64\r\n", "run_id:", run_id_, "\r\n",
      "uptime_in_seconds:", uptime_ms / 1000, "\r\n",
      "uptime_in_days:", uptime_ms / 86400000, "\r\n"));
}

Reply FakeRedis::CmdDbSize(CallContext&, const std::vector<std::string>&) {
  return Reply::Integer(static_cast<int64_t>(DbSize()));
}

Reply FakeRedis::CmdFlushAll(CallContext&, const std::vector<std::string>& argv) {
  if (argv.size() > 2) return SyntaxError();
  if (argv.size() == 2 && !Is(argv[1], "sync") && !Is(argv[1], "async")) return SyntaxError();
  db_.clear();
  return Ok();
}

}  // namespace dlock
