#include "dlock/transport/fake/fake_redis_hashes.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {
namespace fake_redis_internal {
namespace {

using HashFields = std::vector<std::pair<std::string, std::string>>;

HashFields::iterator FindField(HashFields& h, const std::string& field) {
  return std::find_if(h.begin(), h.end(), [&](const auto& p) { return p.first == field; });
}

}  // namespace

void HashCommands::Register(CommandTable* table) {
  using H = HashCommands;
  table->Add("hset", -4, kWrite, this, &H::HSet);
  table->Add("hget", 3, 0, this, &H::HGet);
  table->Add("hdel", -3, kWrite, this, &H::HDel);
  table->Add("hexists", 3, 0, this, &H::HExists);
  table->Add("hincrby", 4, kWrite, this, &H::HIncrBy);
  table->Add("hlen", 2, 0, this, &H::HLen);
  table->Add("hgetall", 2, 0, this, &H::HGetAll);
}

Reply HashCommands::HSet(const Args& argv) {
  if (argv.size() % 2 == 1) return ArityError("hset");
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) v = keyspace_->Create(argv[1], Value::Kind::kHash);
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

Reply HashCommands::HGet(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) return Reply::Nil();
  auto it = FindField(v->hash, argv[2]);
  if (it == v->hash.end()) return Reply::Nil();
  return Reply::String(it->second);
}

Reply HashCommands::HDel(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  int64_t deleted = 0;
  for (size_t i = 2; i < argv.size(); ++i) {
    auto it = FindField(v->hash, argv[i]);
    if (it == v->hash.end()) continue;
    v->hash.erase(it);
    ++deleted;
    if (v->hash.empty()) {
      keyspace_->Delete(argv[1]);
      break;
    }
  }
  return Reply::Integer(deleted);
}

Reply HashCommands::HExists(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  return Reply::Integer(FindField(v->hash, argv[2]) != v->hash.end() ? 1 : 0);
}

Reply HashCommands::HIncrBy(const Args& argv) {
  int64_t by;
  if (!ParseInt64(argv[3], &by)) return NotInteger();
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  int64_t value = 0;
  HashFields::iterator it;
  if (v != nullptr && (it = FindField(v->hash, argv[2])) != v->hash.end()) {
    if (!ParseInt64(it->second, &value)) return Reply::Error("ERR hash value is not an integer");
  }
  int64_t result;
  if (__builtin_add_overflow(value, by, &result)) {
    return Reply::Error("ERR increment or decrement would overflow");
  }
  if (v == nullptr) v = keyspace_->Create(argv[1], Value::Kind::kHash);
  it = FindField(v->hash, argv[2]);
  if (it == v->hash.end()) {
    v->hash.emplace_back(argv[2], absl::StrCat(result));
  } else {
    it->second = absl::StrCat(result);
  }
  return Reply::Integer(result);
}

Reply HashCommands::HLen(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  return Reply::Integer(static_cast<int64_t>(v->hash.size()));
}

Reply HashCommands::HGetAll(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kHash, &v)) return WrongType();
  if (v == nullptr) return Reply::Array({});
  std::vector<Reply> out;
  out.reserve(v->hash.size() * 2);
  for (const auto& [f, val] : v->hash) {
    out.push_back(Reply::String(f));
    out.push_back(Reply::String(val));
  }
  return Reply::Array(std::move(out));
}

}  // namespace fake_redis_internal
}  // namespace dlock
