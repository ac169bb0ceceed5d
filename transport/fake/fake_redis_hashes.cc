// FakeRedis commands: hashes (pure move from fake_redis.cc).
#include "dlock/transport/fake/fake_redis.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {

using fake_redis_internal::ArityError;
using fake_redis_internal::NotInteger;
using fake_redis_internal::ParseInt64;
using fake_redis_internal::WrongType;

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

}  // namespace dlock
