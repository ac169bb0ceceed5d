#include "dlock/fenced/redis_store.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dlock/fenced/redis_store_script.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fenced {
namespace {

constexpr char kBelowFloorUrl[] = "dlock.fenced/below_floor";
// Bounds what one HSET passes to Lua's unpack (its C stack holds ~8000).
constexpr size_t kMaxHashFields = 1000;

// The key as it appears in a message: printable, bounded.
std::string Shown(absl::string_view key) {
  std::string s = absl::CHexEscape(key.substr(0, 200));
  if (key.size() > 200) absl::StrAppend(&s, "...");
  return absl::StrCat("\"", s, "\"");
}

const char* OpName(RedisWrite::Op::Kind kind) {
  switch (kind) {
    case RedisWrite::Op::Kind::kSet:
      return "SET";
    case RedisWrite::Op::Kind::kHashSet:
      return "HSET";
    case RedisWrite::Op::Kind::kIncrBy:
      return "INCRBY";
    case RedisWrite::Op::Kind::kDelete:
      return "DEL";
  }
  return "?";
}

// The resource's part of every key: "{R}", or "#{T}:R" when R's own tag
// would be empty.
std::string TagPart(absl::string_view resource) {
  if (!resource.empty() && resource[0] != '}') return absl::StrCat("{", resource, "}");
  return absl::StrCat("#{", SlotTag(Crc16(resource) % kClusterSlots), "}:", resource);
}

// A transport failure, named for the write.
absl::Status TransportFailure(absl::string_view what, absl::string_view resource,
                              const absl::Status& s) {
  std::string msg = absl::StrCat(what, " \"", absl::CHexEscape(resource), "\": ", s.message());
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&msg, " (the store may or may not have applied it; it is not sent again)");
  }
  return absl::Status(s.code(), msg);
}

// An error reply from the store: the script did not run (or failed).
absl::Status ErrorReply(absl::string_view what, absl::string_view resource,
                        const Reply& reply) {
  std::string msg = absl::StrCat(what, " \"", absl::CHexEscape(resource),
                                 "\": the store answered: ", reply.str);
  if (reply.IsErrorWithPrefix("NOPERM") || reply.IsErrorWithPrefix("NOAUTH") ||
      reply.IsErrorWithPrefix("WRONGPASS")) {
    return absl::PermissionDeniedError(msg);
  }
  return absl::UnavailableError(msg);
}

bool ParseInt(const Reply& r, int64_t* out) {
  if (r.is_integer()) {
    *out = r.integer;
    return true;
  }
  if (r.is_string()) return absl::SimpleAtoi(r.str, out);
  return false;
}

// Turns the script's reply into the write's outcome.
absl::StatusOr<RedisWriteResult> ParseWriteReply(absl::string_view resource, int64_t fence,
                                                 const RedisWrite& write,
                                                 const std::vector<std::string>& keys,
                                                 absl::StatusOr<Reply> reply) {
  constexpr absl::string_view kWhat = "fenced write to";
  if (!reply.ok()) return TransportFailure(kWhat, resource, reply.status());
  if (reply->is_error()) return ErrorReply(kWhat, resource, *reply);
  const std::string prefix = absl::StrCat(kWhat, " \"", absl::CHexEscape(resource), "\": ");
  auto unexpected = [&] {
    return absl::InternalError(
        absl::StrCat(prefix, "unexpected reply from the store: ", reply->DebugString()));
  };
  const std::vector<Reply>& e = reply->elements;
  if (!reply->is_array() || e.size() < 2 || !e[0].is_string() || !e[1].is_integer()) {
    return unexpected();
  }
  const std::string& tag = e[0].str;
  if (tag == "applied") {
    if (e[1].integer != static_cast<int64_t>(write.ops().size()) ||
        e.size() != write.ops().size() + 2) {
      return unexpected();
    }
    RedisWriteResult result;
    result.fence = fence;
    for (size_t i = 2; i < e.size(); ++i) {
      if (!e[i].is_integer()) return unexpected();
      result.values.push_back(e[i].integer);
    }
    return result;
  }
  if (e.size() != 3) return unexpected();
  if (tag == "stale") {
    int64_t highest = 0;
    if (!ParseInt(e[2], &highest)) return unexpected();
    return StaleFenceError(resource, fence, highest);
  }
  if (tag == "foreign") {
    return absl::InternalError(absl::StrCat(
        prefix, "the fence record ", Shown(keys[0]), " holds ",
        e[2].is_string() ? e[2].str : "?",
        " data, not a fence (foreign data under the store's prefix); nothing was applied"));
  }
  const int64_t index = e[1].integer;
  if (index < 1 || index > static_cast<int64_t>(write.ops().size()) || !e[2].is_string()) {
    return unexpected();
  }
  const RedisWrite::Op& op = write.ops()[index - 1];
  const std::string which =
      absl::StrCat("operation ", index, " (", OpName(op.kind), " ", Shown(op.key), ")");
  if (tag == "wrongtype") {
    return absl::InternalError(absl::StrCat(
        prefix, which, ": the key holds a ", e[2].str,
        " (WRONGTYPE: foreign data, never overwritten); nothing was applied"));
  }
  if (tag == "notint") {
    return absl::InternalError(absl::StrCat(prefix, which, ": the key holds \"",
                                            absl::CHexEscape(e[2].str.substr(0, 64)),
                                            "\", not an integer; nothing was applied"));
  }
  if (tag == "floor") {
    absl::Status s = absl::OutOfRangeError(absl::StrCat(
        prefix, which, " by ", op.delta, " refused: the key holds ", e[2].str,
        ", and the result would be below the floor ", op.floor.value_or(0),
        "; nothing was applied"));
    s.SetPayload(kBelowFloorUrl, absl::Cord(e[2].str));
    return s;
  }
  if (tag == "range") {
    return absl::OutOfRangeError(absl::StrCat(prefix, which, " by ", op.delta,
                                              " refused: the key holds ", e[2].str,
                                              ", and the result would leave +-(2^53 - 1); "
                                              "nothing was applied"));
  }
  return unexpected();
}

}  // namespace

RedisWrite& RedisWrite::Set(std::string key, std::string value, absl::Duration ttl) {
  Op op;
  op.kind = Op::Kind::kSet;
  op.key = std::move(key);
  op.value = std::move(value);
  op.ttl = ttl;
  ops_.push_back(std::move(op));
  return *this;
}

RedisWrite& RedisWrite::HashSet(std::string key,
                                std::vector<std::pair<std::string, std::string>> fields) {
  Op op;
  op.kind = Op::Kind::kHashSet;
  op.key = std::move(key);
  op.fields = std::move(fields);
  ops_.push_back(std::move(op));
  return *this;
}

RedisWrite& RedisWrite::IncrBy(std::string key, int64_t delta, absl::optional<int64_t> floor) {
  Op op;
  op.kind = Op::Kind::kIncrBy;
  op.key = std::move(key);
  op.delta = delta;
  op.floor = floor;
  ops_.push_back(std::move(op));
  return *this;
}

RedisWrite& RedisWrite::Delete(std::string key) {
  Op op;
  op.kind = Op::Kind::kDelete;
  op.key = std::move(key);
  ops_.push_back(std::move(op));
  return *this;
}

bool IsBelowFloor(const absl::Status& status) {
  return status.code() == absl::StatusCode::kOutOfRange &&
         status.GetPayload(kBelowFloorUrl).has_value();
}

absl::Status RedisFencedStore::ValidateOptions(const Transport* transport,
                                               const RedisFencedStoreOptions& options) {
  if (transport == nullptr) {
    return absl::InvalidArgumentError("RedisFencedStore: null transport");
  }
  if (options.prefix.find_first_of("{}") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedisFencedStore: prefix ", Shown(options.prefix),
        " contains a brace: the fence record's hash tag must be the resource's"));
  }
  if (options.timeout <= absl::ZeroDuration() || options.timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("RedisFencedStore: timeout ",
                                                   absl::FormatDuration(options.timeout),
                                                   " must be finite and positive"));
  }
  return absl::OkStatus();
}

RedisFencedStore::RedisFencedStore(Transport* transport, RedisFencedStoreOptions options)
    : transport_(transport),
      options_(std::move(options)),
      options_status_(ValidateOptions(transport, options_)) {}

std::string RedisFencedStore::FenceKey(absl::string_view resource) const {
  return absl::StrCat(options_.prefix, TagPart(resource));
}

std::string RedisFencedStore::DataKey(absl::string_view resource,
                                      absl::string_view name) const {
  return absl::StrCat(name, TagPart(resource));
}

absl::Status RedisFencedStore::CheckWrite(absl::string_view resource, int64_t fence,
                                          const RedisWrite& write,
                                          const std::string& fence_key) const {
  if (!options_status_.ok()) return options_status_;
  if (absl::Status s = CheckFenceArgs(resource, fence); !s.ok()) return s;
  const std::string prefix =
      absl::StrCat("fenced write to \"", absl::CHexEscape(resource), "\": ");
  if (fence > kMaxFencedInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "fence ", fence, " is above 2^53 - 1, the largest dlock issues"));
  }
  const bool same_slot = transport_->cluster() || !options_.allow_cross_slot;
  const int record_slot = KeySlot(fence_key);
  absl::flat_hash_set<absl::string_view> seen;
  for (size_t i = 0; i < write.ops().size(); ++i) {
    const RedisWrite::Op& op = write.ops()[i];
    const std::string which =
        absl::StrCat(prefix, "operation ", i + 1, " (", OpName(op.kind), ")");
    if (op.key.empty()) return absl::InvalidArgumentError(absl::StrCat(which, ": empty key"));
    if (op.key == fence_key) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": the key ", Shown(op.key), " is the resource's fence record"));
    }
    if (!seen.insert(op.key).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": the key ", Shown(op.key), " appears twice in one write (one op per key)"));
    }
    if (same_slot && KeySlot(op.key) != record_slot) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": the key ", Shown(op.key), " is not in the slot of the fence record ",
          Shown(fence_key), " (a script's keys must share one Redis Cluster slot): name it ",
          Shown(DataKey(resource, "NAME")), ", i.e. with the resource's hash tag",
          transport_->cluster() ? "" : ", or set allow_cross_slot on a single server"));
    }
    switch (op.kind) {
      case RedisWrite::Op::Kind::kSet:
        if (op.ttl < absl::ZeroDuration() || op.ttl == absl::InfiniteDuration()) {
          return absl::InvalidArgumentError(absl::StrCat(
              which, ": ttl ", absl::FormatDuration(op.ttl), " must be finite and >= 0"));
        }
        break;
      case RedisWrite::Op::Kind::kHashSet:
        if (op.fields.empty() || op.fields.size() > kMaxHashFields) {
          return absl::InvalidArgumentError(absl::StrCat(
              which, ": ", op.fields.size(), " fields (1 to ", kMaxHashFields, " per op)"));
        }
        break;
      case RedisWrite::Op::Kind::kIncrBy:
        if (std::llabs(op.delta) > kMaxFencedInteger ||
            (op.floor.has_value() && std::llabs(*op.floor) > kMaxFencedInteger)) {
          return absl::InvalidArgumentError(
              absl::StrCat(which, ": delta and floor must be within +-(2^53 - 1)"));
        }
        break;
      case RedisWrite::Op::Kind::kDelete:
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status RedisFencedStore::Write(absl::string_view resource, int64_t fence,
                                     RedisWrite write, WriteCallback callback) {
  std::string fence_key = FenceKey(resource);
  if (absl::Status s = CheckWrite(resource, fence, write, fence_key); !s.ok()) return s;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  keys.reserve(write.ops().size() + 1);
  keys.push_back(std::move(fence_key));
  args.push_back(absl::StrCat(fence));
  for (const RedisWrite::Op& op : write.ops()) {
    keys.push_back(op.key);
    switch (op.kind) {
      case RedisWrite::Op::Kind::kSet: {
        args.push_back("set");
        args.push_back(op.value);
        int64_t ms = absl::ToInt64Milliseconds(op.ttl);
        if (op.ttl > absl::Milliseconds(ms)) ++ms;  // round up: never shorter
        args.push_back(absl::StrCat(ms));
        break;
      }
      case RedisWrite::Op::Kind::kHashSet:
        args.push_back("hset");
        args.push_back(absl::StrCat(op.fields.size()));
        for (const auto& [field, value] : op.fields) {
          args.push_back(field);
          args.push_back(value);
        }
        break;
      case RedisWrite::Op::Kind::kIncrBy:
        args.push_back("incr");
        args.push_back(absl::StrCat(op.delta));
        args.push_back(op.floor.has_value() ? absl::StrCat(*op.floor) : "");
        break;
      case RedisWrite::Op::Kind::kDelete:
        args.push_back("del");
        break;
    }
  }
  // The keys go to the script as a copy; the handler keeps them for messages.
  std::vector<std::string> sent_keys = keys;
  return FencedRedisWriteScript().Run(
      *transport_, std::move(sent_keys), std::move(args), options_.timeout,
      [resource = std::string(resource), fence, write = std::move(write),
       keys = std::move(keys),
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        std::move(callback)(ParseWriteReply(resource, fence, write, keys, std::move(reply)));
      });
}

absl::Status RedisFencedStore::HighestFence(absl::string_view resource,
                                            FenceCallback callback) {
  if (!options_status_.ok()) return options_status_;
  if (resource.empty()) {
    return absl::InvalidArgumentError("fence record: empty resource name");
  }
  std::string key = FenceKey(resource);
  return transport_->Send(
      {"GET", key}, options_.timeout,
      [resource = std::string(resource), key,
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        constexpr absl::string_view kWhat = "reading the fence record of";
        if (!reply.ok()) {
          return std::move(callback)(TransportFailure(kWhat, resource, reply.status()));
        }
        if (reply->IsErrorWithPrefix("WRONGTYPE")) {
          return std::move(callback)(absl::InternalError(
              absl::StrCat("the fence record ", Shown(key), " of \"",
                           absl::CHexEscape(resource), "\" is not a string (foreign data)")));
        }
        if (reply->is_error()) {
          return std::move(callback)(ErrorReply(kWhat, resource, *reply));
        }
        if (reply->is_nil()) return std::move(callback)(int64_t{0});
        int64_t fence = 0;
        if (!reply->is_string() || !absl::SimpleAtoi(reply->str, &fence) || fence < 0) {
          return std::move(callback)(absl::InternalError(
              absl::StrCat("the fence record ", Shown(key), " of \"", absl::CHexEscape(resource),
                           "\" holds ", reply->DebugString(), ", not a fence (foreign data)")));
        }
        std::move(callback)(fence);
      });
}

}  // namespace fenced
}  // namespace dlock
