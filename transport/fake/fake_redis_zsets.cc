// FakeRedis commands: sorted sets, as redis-server 7.0.15's t_zset.c answers
// them (the order of checks, the error texts, the reply types). Scores are
// doubles printed with "%.17g" (Redis 7.0's addReplyDouble; 7.2 switched to
// the shortest round-trip form), so ZSCORE of 1.1 is "1.1000000000000001".
// A score of -0 is stored as 0, as a listpack-encoded set (<= 128 members
// of <= 64 bytes) does; a skiplist-encoded one would keep -0. Not
// implemented: BYLEX and the lex commands, ZUNION/ZINTER/ZDIFF, the
// blocking pops, ZRANGESTORE, ZREVRANK/ZPOPMAX and friends.
#include "dlock/transport/fake/fake_redis_zsets.h"

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <utility>

#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {
namespace fake_redis_internal {
namespace {

// Redis's string2d (util.c): the whole string must be a strtod number, no
// leading space, no NaN, no overflow to +-HUGE_VAL or underflow to zero.
bool ParseScore(const std::string& s, double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (static_cast<size_t>(end - s.c_str()) != s.size()) return false;
  if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || std::fpclassify(d) == FP_ZERO)) {
    return false;
  }
  if (std::isnan(d)) return false;
  *out = d;
  return true;
}

// One end of a score range (zslParseRange): "(" makes it exclusive; the rest
// is read by strtod as a C string (so "" is 0 and " 1" is 1), never NaN.
bool ParseRangeEnd(const std::string& s, double* value, bool* exclusive) {
  const char* p = s.c_str();
  *exclusive = false;
  if (p[0] == '(') {
    *exclusive = true;
    ++p;
  }
  char* end = nullptr;
  *value = std::strtod(p, &end);
  return end[0] == '\0' && !std::isnan(*value);
}

struct ScoreRange {
  double min = 0, max = 0;
  bool minex = false, maxex = false;
  bool Contains(double v) const {
    return (minex ? v > min : v >= min) && (maxex ? v < max : v <= max);
  }
};

bool ParseScoreRange(const std::string& min, const std::string& max, ScoreRange* r) {
  return ParseRangeEnd(min, &r->min, &r->minex) && ParseRangeEnd(max, &r->max, &r->maxex);
}

Reply NotFloat() { return Reply::Error("ERR value is not a valid float"); }
Reply RangeNotFloat() { return Reply::Error("ERR min or max is not a float"); }

// addReplyDouble in RESP2, Redis 7.0.
Reply Score(double d) {
  if (std::isinf(d)) return Reply::String(d > 0 ? "inf" : "-inf");
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%.17g", d);
  return Reply::String(std::string(buf, n));
}

// Rank indexes as Redis sanitizes them: negatives count from the end; false
// when the range is empty.
bool SanitizeRank(int64_t len, int64_t* start, int64_t* end) {
  if (*start < 0) *start = len + *start;
  if (*end < 0) *end = len + *end;
  if (*start < 0) *start = 0;
  if (*start > *end || *start >= len) return false;
  if (*end >= len) *end = len - 1;
  return true;
}

// A ZRANGE or ZRANGEBYSCORE request, parsed.
struct ZRangeRequest {
  bool withscores = false, rev = false, by_score = false;
  int64_t offset = 0, limit = -1;  // LIMIT
  ScoreRange range;                // by_score
  int64_t start = 0, end = 0;      // by rank
};

// zrangeGenericCommand's parsing: ZRANGE key start stop [BYSCORE] [REV]
// [LIMIT o c] [WITHSCORES], or ZRANGEBYSCORE key min max [WITHSCORES]
// [LIMIT o c]. Returns false with *error set to Redis's reply.
bool ParseZRange(const Args& argv, bool by_score_command, ZRangeRequest* req, Reply* error) {
  req->by_score = by_score_command;
  bool by_lex = false;
  for (size_t j = 4; j < argv.size(); ++j) {
    const size_t left = argv.size() - j - 1;
    if (Is(argv[j], "withscores")) {
      req->withscores = true;
    } else if (Is(argv[j], "limit") && left >= 2) {
      if (!ParseInt64(argv[j + 1], &req->offset) || !ParseInt64(argv[j + 2], &req->limit)) {
        *error = NotInteger();
        return false;
      }
      j += 2;
    } else if (!by_score_command && !req->rev && Is(argv[j], "rev")) {
      req->rev = true;
    } else if (!by_score_command && !req->by_score && !by_lex && Is(argv[j], "bylex")) {
      by_lex = true;
    } else if (!by_score_command && !req->by_score && !by_lex && Is(argv[j], "byscore")) {
      req->by_score = true;
    } else {
      *error = SyntaxError();
      return false;
    }
  }
  if (req->limit != -1 && !req->by_score && !by_lex) {
    *error = FormatError(
        "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
  } else if (req->withscores && by_lex) {
    *error = FormatError("syntax error, WITHSCORES not supported in combination with BYLEX");
  } else if (by_lex) {
    *error = FormatError("BYLEX is not supported by FakeRedis");
  } else if (req->by_score) {
    // REV takes the range as max, min.
    const std::string& min = req->rev ? argv[3] : argv[2];
    const std::string& max = req->rev ? argv[2] : argv[3];
    if (ParseScoreRange(min, max, &req->range)) return true;
    *error = RangeNotFloat();
  } else {
    if (ParseInt64(argv[2], &req->start) && ParseInt64(argv[3], &req->end)) return true;
    *error = NotInteger();
  }
  return false;
}

using Entry = std::pair<double, std::string>;

// The entries of a sorted set a ZRANGE request selects, in reply order.
std::vector<const Entry*> SelectRange(const std::set<Entry>& zorder, ZRangeRequest req) {
  std::vector<const Entry*> picked;
  if (req.by_score) {
    std::vector<const Entry*> in_range;
    auto visit = [&](const Entry& e) {
      if (req.range.Contains(e.first)) in_range.push_back(&e);
    };
    if (req.rev) {
      for (auto it = zorder.rbegin(); it != zorder.rend(); ++it) visit(*it);
    } else {
      for (const auto& e : zorder) visit(e);
    }
    // LIMIT: a negative offset skips everything, a negative count means all.
    if (req.offset >= 0) {
      for (size_t i = static_cast<size_t>(std::min<int64_t>(req.offset, in_range.size()));
           i < in_range.size() &&
           (req.limit < 0 || static_cast<int64_t>(picked.size()) < req.limit);
           ++i) {
        picked.push_back(in_range[i]);
      }
    }
  } else if (SanitizeRank(static_cast<int64_t>(zorder.size()), &req.start, &req.end)) {
    std::vector<const Entry*> all;
    for (const auto& e : zorder) all.push_back(&e);
    if (req.rev) std::reverse(all.begin(), all.end());
    for (int64_t i = req.start; i <= req.end; ++i) picked.push_back(all[i]);
  }
  return picked;
}

}  // namespace

void ZSetCommands::Register(CommandTable* table) {
  using Z = ZSetCommands;
  table->Add("zadd", -4, kWrite, this, &Z::ZAdd);
  table->Add("zincrby", 4, kWrite, this, &Z::ZIncrBy);
  table->Add("zrem", -3, kWrite, this, &Z::ZRem);
  table->Add("zcard", 2, 0, this, &Z::ZCard);
  table->Add("zscore", 3, 0, this, &Z::ZScore);
  table->Add("zrank", 3, 0, this, &Z::ZRank);
  table->Add("zrange", -4, 0, this, &Z::ZRange);
  table->Add("zrangebyscore", -4, 0, this, &Z::ZRangeByScore);
  table->Add("zremrangebyscore", 4, kWrite, this, &Z::ZRemRangeByScore);
  table->Add("zremrangebyrank", 4, kWrite, this, &Z::ZRemRangeByRank);
  table->Add("zpopmin", -2, kWrite, this, &Z::ZPopMin);
}

Reply ZSetCommands::ZAddGeneric(const Args& argv, bool incr) {
  bool nx = false, xx = false, gt = false, lt = false, ch = false;
  size_t idx = 2;
  for (; idx < argv.size(); ++idx) {
    const std::string& opt = argv[idx];
    if (Is(opt, "nx")) {
      nx = true;
    } else if (Is(opt, "xx")) {
      xx = true;
    } else if (Is(opt, "ch")) {
      ch = true;
    } else if (Is(opt, "incr")) {
      incr = true;
    } else if (Is(opt, "gt")) {
      gt = true;
    } else if (Is(opt, "lt")) {
      lt = true;
    } else {
      break;
    }
  }
  const size_t args = argv.size() - idx;
  if (args == 0 || args % 2 != 0) return SyntaxError();
  const size_t pairs = args / 2;
  if (nx && xx) return FormatError("XX and NX options at the same time are not compatible");
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    return FormatError("GT, LT, and/or NX options at the same time are not compatible");
  }
  if (incr && pairs > 1) {
    return FormatError("INCR option supports a single increment-element pair");
  }
  // All scores are parsed before anything changes (and before the type
  // check, as Redis does).
  std::vector<double> scores(pairs);
  for (size_t j = 0; j < pairs; ++j) {
    if (!ParseScore(argv[idx + 2 * j], &scores[j])) return NotFloat();
  }
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  int64_t added = 0, updated = 0, processed = 0;
  double last = 0;
  if (v == nullptr) {
    if (xx) return incr ? Reply::Nil() : Reply::Integer(0);
    v = keyspace_->Create(argv[1], Value::Kind::kZSet);
  }
  for (size_t j = 0; j < pairs; ++j) {
    double score = scores[j];
    const std::string& member = argv[idx + 2 * j + 1];
    auto it = v->zscore.find(member);
    if (it != v->zscore.end()) {
      if (nx) continue;
      const double current = it->second;
      if (incr) {
        score += current;
        if (std::isnan(score)) return FormatError("resulting score is not a number (NaN)");
      }
      if ((lt && score >= current) || (gt && score <= current)) continue;
      last = score;
      ++processed;
      if (score == 0) score = 0.0;  // -0 is stored as 0 (see the top)
      if (score != current) {
        v->zorder.erase({current, member});
        v->zorder.insert({score, member});
        it->second = score;
        ++updated;
      }
    } else if (!xx) {
      last = score;
      if (score == 0) score = 0.0;  // -0 is stored as 0 (see the top)
      v->zscore.emplace(member, score);
      v->zorder.insert({score, member});
      ++added;
      ++processed;
    }
  }
  if (incr) return processed > 0 ? Score(last) : Reply::Nil();
  return Reply::Integer(ch ? added + updated : added);
}

Reply ZSetCommands::ZRem(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  int64_t deleted = 0;
  for (size_t i = 2; i < argv.size(); ++i) {
    auto it = v->zscore.find(argv[i]);
    if (it == v->zscore.end()) continue;
    v->zorder.erase({it->second, it->first});
    v->zscore.erase(it);
    ++deleted;
    if (v->zscore.empty()) {
      keyspace_->Delete(argv[1]);
      break;
    }
  }
  return Reply::Integer(deleted);
}

Reply ZSetCommands::ZCard(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  return Reply::Integer(static_cast<int64_t>(v->zscore.size()));
}

Reply ZSetCommands::ZScore(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Nil();
  auto it = v->zscore.find(argv[2]);
  if (it == v->zscore.end()) return Reply::Nil();
  return Score(it->second);
}

Reply ZSetCommands::ZRank(const Args& argv) {
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Nil();
  auto it = v->zscore.find(argv[2]);
  if (it == v->zscore.end()) return Reply::Nil();
  auto pos = v->zorder.find({it->second, it->first});
  return Reply::Integer(static_cast<int64_t>(std::distance(v->zorder.begin(), pos)));
}

// zrangeGenericCommand: ZRANGE key start stop [BYSCORE] [REV] [LIMIT o c]
// [WITHSCORES], and ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT o c].
Reply ZSetCommands::ZRangeGeneric(const Args& argv, bool by_score_command) {
  ZRangeRequest req;
  Reply error;
  if (!ParseZRange(argv, by_score_command, &req, &error)) return error;
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Array({});
  std::vector<Reply> out;
  for (const Entry* e : SelectRange(v->zorder, req)) {
    out.push_back(Reply::String(e->second));
    if (req.withscores) out.push_back(Score(e->first));
  }
  return Reply::Array(std::move(out));
}

Reply ZSetCommands::ZRemRangeGeneric(const Args& argv, bool by_score) {
  ScoreRange range;
  int64_t start = 0, end = 0;
  if (by_score) {
    if (!ParseScoreRange(argv[2], argv[3], &range)) return RangeNotFloat();
  } else if (!ParseInt64(argv[2], &start) || !ParseInt64(argv[3], &end)) {
    return NotInteger();
  }
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Integer(0);
  if (!by_score && !SanitizeRank(static_cast<int64_t>(v->zorder.size()), &start, &end)) {
    return Reply::Integer(0);
  }
  int64_t deleted = 0, rank = 0;
  for (auto it = v->zorder.begin(); it != v->zorder.end(); ++rank) {
    const bool hit = by_score ? range.Contains(it->first) : (rank >= start && rank <= end);
    if (hit) {
      v->zscore.erase(it->second);
      it = v->zorder.erase(it);
      ++deleted;
    } else {
      ++it;
    }
  }
  if (v->zorder.empty()) keyspace_->Delete(argv[1]);
  return Reply::Integer(deleted);
}

Reply ZSetCommands::ZPopMin(const Args& argv) {
  if (argv.size() > 3) return SyntaxError();
  int64_t count = 1;
  if (argv.size() == 3 && (!ParseInt64(argv[2], &count) || count < 0)) {
    return FormatError("value is out of range, must be positive");
  }
  Value* v;
  if (!keyspace_->Lookup(argv[1], Value::Kind::kZSet, &v)) return WrongType();
  if (v == nullptr) return Reply::Array({});
  std::vector<Reply> out;
  for (int64_t i = 0; i < count && !v->zorder.empty(); ++i) {
    auto it = v->zorder.begin();
    out.push_back(Reply::String(it->second));
    out.push_back(Score(it->first));
    v->zscore.erase(it->second);
    v->zorder.erase(it);
  }
  if (v->zorder.empty()) keyspace_->Delete(argv[1]);
  return Reply::Array(std::move(out));
}

}  // namespace fake_redis_internal
}  // namespace dlock
