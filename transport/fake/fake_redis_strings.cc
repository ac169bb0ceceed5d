#include "dlock/transport/fake/fake_redis_strings.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {
namespace fake_redis_internal {

void StringCommands::Register(CommandTable* table) {
  using S = StringCommands;
  table->Add("get", 2, 0, this, &S::Get);
  table->Add("set", -3, kWrite, this, &S::Set);
  table->Add("setnx", 3, kWrite, this, &S::SetNx);
  table->Add("getdel", 2, kWrite, this, &S::GetDel);
  table->Add("del", -2, kWrite, this, &S::Del);
  table->Add("exists", -2, 0, this, &S::Exists);
  table->Add("type", 2, 0, this, &S::Type);
  table->Add("echo", 2, 0, this, &S::Echo);
  table->Add("incr", 2, kWrite, this, &S::Incr);
  table->Add("decr", 2, kWrite, this, &S::Decr);
  table->Add("incrby", 3, kWrite, this, &S::IncrBy);
  table->Add("decrby", 3, kWrite, this, &S::DecrBy);
  table->Add("pexpire", -3, kWrite, this, &S::PExpire);
  table->Add("expire", -3, kWrite, this, &S::Expire);
  table->Add("pttl", 2, 0, this, &S::PTtl);
  table->Add("ttl", 2, 0, this, &S::Ttl);
  table->Add("persist", 2, kWrite, this, &S::Persist);
}

// ---------------------------------------------------------------------------
// Strings.

Reply StringCommands::Get(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kString, &v)) return WrongType();
  if (v == nullptr) return Reply::Nil();
  return Reply::String(v->str);
}

Reply StringCommands::Set(const Args& argv) {
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
      if (__builtin_add_overflow(ms, keyspace_->NowMs(), &sum)) return ExpireTimeError("set");
      ms = sum;
    }
    if (ms <= 0) return ExpireTimeError("set");
  }
  Reply get_reply;
  Value* old = keyspace_->Find(argv[1]);
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
  Value* v = keyspace_->Create(argv[1], Value::Kind::kString);
  v->str = argv[2];
  v->expire_ms = keep;
  if (expire != nullptr) v->expire_ms = ms;
  return (flags & GET) ? get_reply : Ok();
}

Reply StringCommands::SetNx(const Args& argv) {
  if (keyspace_->Find(argv[1]) != nullptr) return Reply::Integer(0);
  keyspace_->Create(argv[1], Value::Kind::kString)->str = argv[2];
  return Reply::Integer(1);
}

Reply StringCommands::GetDel(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kString, &v)) return WrongType();
  if (v == nullptr) return Reply::Nil();
  Reply r = Reply::String(v->str);
  keyspace_->Delete(argv[1]);
  return r;
}

Reply StringCommands::Del(const Args& argv) {
  int64_t n = 0;
  for (size_t i = 1; i < argv.size(); ++i) n += keyspace_->Delete(argv[i]) ? 1 : 0;
  return Reply::Integer(n);
}

Reply StringCommands::Exists(const Args& argv) {
  int64_t n = 0;
  for (size_t i = 1; i < argv.size(); ++i) n += keyspace_->Find(argv[i]) != nullptr ? 1 : 0;
  return Reply::Integer(n);
}

Reply StringCommands::Type(const Args& argv) {
  Value* v = keyspace_->Find(argv[1]);
  if (v == nullptr) return Reply::Status("none");
  switch (v->kind) {
    case Value::Kind::kString: return Reply::Status("string");
    case Value::Kind::kHash: return Reply::Status("hash");
    case Value::Kind::kZSet: return Reply::Status("zset");
  }
  return Reply::Status("none");
}

Reply StringCommands::Echo(const Args& argv) { return Reply::String(argv[1]); }

Reply StringCommands::IncrDecr(const std::string& key, int64_t by) {
  Value* v;
  if (!keyspace_->Lookup(key, Value::Kind::kString, &v)) return WrongType();
  int64_t value = 0;
  if (v != nullptr && !ParseInt64(v->str, &value)) return NotInteger();
  int64_t result;
  if (__builtin_add_overflow(value, by, &result)) {
    return Reply::Error("ERR increment or decrement would overflow");
  }
  if (v == nullptr) v = keyspace_->Create(key, Value::Kind::kString);
  v->str = absl::StrCat(result);  // the TTL is kept, as in Redis
  return Reply::Integer(result);
}

Reply StringCommands::IncrBy(const Args& argv) {
  int64_t by;
  if (!ParseInt64(argv[2], &by)) return NotInteger();
  return IncrDecr(argv[1], by);
}

Reply StringCommands::DecrBy(const Args& argv) {
  int64_t by;
  if (!ParseInt64(argv[2], &by)) return NotInteger();
  if (by == LLONG_MIN) return Reply::Error("ERR decrement would overflow");
  return IncrDecr(argv[1], -by);
}

// ---------------------------------------------------------------------------
// Expiry.

Reply StringCommands::ExpireGeneric(const Args& argv, bool seconds) {
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
  const int64_t now = keyspace_->NowMs();
  if (when > LLONG_MAX - now) return ExpireTimeError(name);
  when += now;

  Value* v = keyspace_->Find(argv[1]);
  if (v == nullptr) return Reply::Integer(0);
  const int64_t current = v->expire_ms;
  if (nx && current != -1) return Reply::Integer(0);
  if (xx && current == -1) return Reply::Integer(0);
  if (gt && (when <= current || current == -1)) return Reply::Integer(0);
  if (lt && current != -1 && when >= current) return Reply::Integer(0);
  if (when <= now) {
    keyspace_->Delete(argv[1]);
    return Reply::Integer(1);
  }
  v->expire_ms = when;
  return Reply::Integer(1);
}

Reply StringCommands::TtlGeneric(const std::string& key, bool ms) {
  const int64_t ttl = keyspace_->PTtl(key);
  if (ttl < 0) return Reply::Integer(ttl);
  return Reply::Integer(ms ? ttl : (ttl + 500) / 1000);
}

Reply StringCommands::Persist(const Args& argv) {
  Value* v = keyspace_->Find(argv[1]);
  if (v == nullptr || v->expire_ms == -1) return Reply::Integer(0);
  v->expire_ms = -1;
  return Reply::Integer(1);
}

}  // namespace fake_redis_internal
}  // namespace dlock
