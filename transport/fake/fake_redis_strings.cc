// FakeRedis commands: strings, keys and expiry (pure move from fake_redis.cc).
#include "dlock/transport/fake/fake_redis.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {

using fake_redis_internal::CStr;
using fake_redis_internal::ExpireTimeError;
using fake_redis_internal::FormatError;
using fake_redis_internal::Is;
using fake_redis_internal::NotInteger;
using fake_redis_internal::Ok;
using fake_redis_internal::ParseInt64;
using fake_redis_internal::SyntaxError;
using fake_redis_internal::WrongType;

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
  switch (v->kind) {
    case Value::Kind::kString: return Reply::Status("string");
    case Value::Kind::kHash: return Reply::Status("hash");
    case Value::Kind::kZSet: return Reply::Status("zset");
  }
  return Reply::Status("none");
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

}  // namespace dlock
