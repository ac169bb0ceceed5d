// The differential test of FakeRedis: seeded random command sequences run on
// the fake and on a real redis-server (7.0.15, started by RedisServer), and
// every reply must be identical, byte for byte.
//
// What is generated: strings, expiry, hashes, counters, pub/sub publishing,
// sorted sets (ZADD with every option, ZINCRBY, ZREM, ZCARD, ZSCORE, ZRANK,
// ZRANGE/ZRANGEBYSCORE with ranges, LIMIT and WITHSCORES, the ZREMRANGE
// pair, ZPOPMIN; scores that print differently under %.17g), scripting
// (EVAL/EVALSHA/SCRIPT, a pool of scripts covering the conversion
// rules, redis.call/pcall errors, global protection, shebangs, compile and
// runtime errors) and every dlock lock script (//lock:scripts; the
// semaphore's and the fair lock's, whose scores and queue expiries are
// server times, in walks of their own; the fair walk also compares the
// keyspace after every step), plus bad input: wrong arity, non-integer and negative TTLs, unknown commands and
// subcommands, wrong-type operations, binary keys and values.
//
// Time: the real server's clock runs while the test runs. Keys only get long
// TTLs (>= 1000 s, in buckets 1e6 ms apart, and each TTL handed out is 100
// ms (or 1 s) longer than the last of its bucket, so a GT/LT comparison never
// ties, even when the same bucket is re-applied within a millisecond),
// the fake's clock starts at the real server's TIME, and before every command
// the ManualEventLoop is advanced to the real server's TIME, so both agree to
// within milliseconds. PTTL and TTL are compared with a tolerance (PTTL +-50
// ms, TTL +-1 s); TIME only by shape; INFO's run_id is never compared.
//
// A mismatch fails the test with the seed, the index and text of the first
// differing command, both replies, and the commands before it. To replay one
// seed: DLOCK_DIFFERENTIAL_SEED=<seed> (and DLOCK_DIFFERENTIAL_COMMANDS=<n>);
// for a longer hunt: DLOCK_DIFFERENTIAL_SEEDS=<number of seeds, from 1>.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/fenced/redis_store_script.h"
#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using Argv = std::vector<std::string>;

std::string Render(const Argv& argv) {
  std::vector<std::string> parts;
  for (const std::string& a : argv) parts.push_back("\"" + absl::CHexEscape(a) + "\"");
  return absl::StrJoin(parts, " ");
}

// ---------------------------------------------------------------------------
// The generator.

const std::vector<std::string>& Keys() {
  static const auto* const v = new std::vector<std::string>{
      "k1", "k2", "k3", "h1", "h2", "n1", std::string("b\0in", 4), "{r}lock", "{r}lock:fence", "z1", "z2"};
  return *v;
}

// Sorted-set scores: valid ones (some print differently under %.17g, some
// are out of the double range or underflow) and invalid ones.
const std::vector<std::string>& Scores() {
  static const auto* const v = new std::vector<std::string>{
      "1", "2", "3", "-1", "0", "-0", "1.5", "1.1", "0.1", "3.0000000000000004", "1e308",
      "inf", "-inf", "+inf", "Infinity", "12345678901234567890", "1e-320", "0x10",
      "1e309", "1e-400", "nan", "abc", "", " 1", "1 ", std::string("1\0x", 3), "(1"};
  return *v;
}

// Ends of a score range: inclusive, exclusive "(", infinities and bad ones.
const std::vector<std::string>& RangeEnds() {
  static const auto* const v = new std::vector<std::string>{
      "-inf", "+inf", "inf", "0", "1", "2", "1.5", "(1", "(2", "(1.5", "(-inf", "(+inf",
      "", "(", " 1", "abc", "(abc", "nan", "1e309", "-1", std::string("1\0x", 3)};
  return *v;
}

const std::vector<std::string>& Members() {
  static const auto* const v = new std::vector<std::string>{
      "a", "b", "c", "d", "", "tokA", std::string("m\0x", 3), "B"};
  return *v;
}

// Values for strings (the long one would turn a hash into a hashtable, whose
// HGETALL order differs from insertion order: strings only).
const std::vector<std::string>& Values() {
  static const auto* const v = new std::vector<std::string>{
      "", "v", "value", "0", "1", "-1", "42", "9223372036854775807", "-9223372036854775808",
      "9223372036854775808", "01", " 1", "+1", "1.5", "abc", std::string("a\0b", 3), "x\r\ny",
      "tokA", "tokB", std::string(100, 'L')};
  return *v;
}

const std::vector<std::string>& HashValues() {
  static const auto* const v = new std::vector<std::string>{
      "", "v", "0", "1", "-1", "42", "9223372036854775807", "abc", "01", std::string("a\0b", 3)};
  return *v;
}

const std::vector<std::string>& Fields() {
  static const auto* const v =
      new std::vector<std::string>{"f1", "f2", "f3", "", std::string("f\0x", 3), "tokA"};
  return *v;
}

// Valid TTLs, far apart so no comparison can tie while real time passes.
const std::vector<std::string>& LongPx() {
  static const auto* const v = new std::vector<std::string>{"1000000", "3000000", "5000000"};
  return *v;
}
const std::vector<std::string>& LongEx() {
  static const auto* const v = new std::vector<std::string>{"2000", "4000", "6000"};
  return *v;
}
const std::vector<std::string>& BadTtls() {
  static const auto* const v = new std::vector<std::string>{
      "0", "-5", "abc", "", "9223372036854775807", "99999999999999999999", "1.5",
      "-9223372036854775808", " 10", "+10", "010"};
  return *v;
}
const std::vector<std::string>& Integers() {
  static const auto* const v = new std::vector<std::string>{
      "1", "-1", "0", "5", "-100", "9223372036854775807", "-9223372036854775808", "abc", "1.5",
      "", "01", "99999999999999999999"};
  return *v;
}
// ARGV safe in error messages that Redis does not sanitize (no CR/LF).
const std::vector<std::string>& SafeArgs() {
  static const auto* const v = new std::vector<std::string>{
      "x", "12", "-3.5", "tokA", "", std::string("n\0ul", 4), "1000000", "abc def"};
  return *v;
}

struct ScriptCase {
  std::string body;
  bool safe_args_only;  // ARGV end up in an unsanitized error reply
  bool ttl_args = false;  // ARGV are TTLs: only long, non-positive or bad ones
  bool hash_args = false;  // ARGV become hash fields/values: short ones only
};

const std::vector<ScriptCase>& ScriptPool() {
  static const auto* const v = new std::vector<ScriptCase>{
      {"return redis.call('get', KEYS[1])", false},
      {"return redis.pcall('get', KEYS[1])", false},
      {"return redis.call('set', KEYS[1], ARGV[1])", false},
      {"return redis.call('incr', KEYS[1])", false},
      {"return {KEYS[1], ARGV[1], #KEYS, #ARGV}", false},
      {"return tonumber(ARGV[1])", false},
      {"return ARGV[1] + 0", true},
      {"return {1, 2, nil, 4}", false},
      {"return {ok='fine'}", false},
      {"return {err='My Error'}", false},
      {"return redis.error_reply(ARGV[1])", false},
      {"return redis.status_reply(ARGV[1])", false},
      {"error(ARGV[1])", true},
      // (An error table without `err` crashes redis-server 7.0.15.)
      {"error({err='E ' .. (ARGV[1] or 'none')})", true},
      {"error(nil)", false},
      {"return redis.call('hgetall', KEYS[1])", false},
      {"return redis.call('publish', ARGV[1], 'x')", false},
      {"local t = {} for i = 1, 5 do t[i] = i * 1.5 end return t", false},
      {"return {double = tonumber(ARGV[1])}", false},
      {"x = 1", false},
      {"return undefined_var", false},
      {"foo(", false},
      {"return redis.call('nosuch')", false},
      {"return redis.call('get')", false},
      {"return redis.call('eval', 'return 1', '0')", false},
      {"return redis.call()", false},
      {"return redis.call({})", false},
      {"return math.random(100)", false},
      {"return tostring(math.random())", false},
      {"return redis.sha1hex(ARGV[1])", false},
      {"return type(redis.call('get', KEYS[1]))", false},
      {"return redis.call('pexpire', KEYS[1], ARGV[1])", false, true},
      {"return {pcall(redis.call, 'incr', KEYS[1])}", false},
      {"return redis.call('ttl', KEYS[1]) > 100", false},
      {"#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'x')", false},
      {"#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", false},
      {"#!lua\nreturn 5", false},
      {"#!lua flags=bogus\nreturn 5", false},
      {"return string.format('%d', ARGV[1])", true},
      {"return redis.call('set', KEYS[1], 'v', 'PX', ARGV[1], ARGV[2])", false, true},
      {"return redis.call('hset', KEYS[1], ARGV[1], ARGV[2])", false, false, true},
      {"return redis.call('zadd', KEYS[1], ARGV[1], ARGV[2])", false},
      {"return redis.pcall('zincrby', KEYS[1], ARGV[1], 'm')", false},
      {"return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", false},
      {"return redis.call('zrangebyscore', KEYS[1], ARGV[1] or '-inf', ARGV[2] or '+inf')",
       false},
      {"return redis.call('zscore', KEYS[1], ARGV[1] or 'a')", false},
      {"redis.call('zadd', KEYS[1], 1, 'a', 2.5, 'b') "
       "return {redis.call('zcard', KEYS[1]), redis.call('zremrangebyscore', KEYS[1], "
       "'-inf', 1), redis.call('zrank', KEYS[1], 'b'), redis.call('zpopmin', KEYS[1])}",
       false},
      {"redis.call('del', KEYS[1]) return redis.call('exists', KEYS[1])", false},
      {"return 0/0", false},
      {"return -1e300", false},
      {"return {true, false, 'a', {1, {2}}}", false},
      {"string.x = 1", false},
      {"rawset(_G, 'y', 1)", false},
      {"return redis.call('set', KEYS[1], 3.25)", false},
      {"local ok, e = pcall(error, 'boom') return e", false},
      {"return redis.pcall('hincrby', KEYS[1], 'f', 'x')", false},
      {"return redis.call('incrby', KEYS[1], ARGV[1])", false},
      {"return {redis.call('type', KEYS[1])}", false},
      {"\n\nreturn nil .. 1", false},
      {"return redis.call('ping')", false},
      {"return redis.call('echo', ARGV[1])", false},
      {"return #redis.call('time')", false},
      {"return redis.call('dbsize')", false},
      {"return redis.call('script', 'load', 'return 1')", false},
      {"return redis.call('script', 'foo')", false},
      {"return redis.call('subscribe', 'x')", false},
      {"return redis.call('type', KEYS[1]).ok", false},
      {"local function f()\n  error('deep')\nend\nf()", false},
      {"math.randomseed(7) return math.random(1000)", false},
      {"return redis.pcall('nosuch', 'a')", false},
      {"return redis.call('exists', KEYS[1], KEYS[2], KEYS[3])", false},
      {"return {redis.call('hgetall', KEYS[1]), redis.call('hlen', KEYS[1])}", false},
      {"return _VERSION", false},
      {"local t = redis.call('get', KEYS[1]) if t then return #t end return -1", false},
  };
  return *v;
}

// The data-set markers the acquire scripts are given, with their values:
// trusted, old (a fixed time, ~1e6 s before the test), and foreign.
const std::vector<std::pair<std::string, std::string>>& DataSetMarkers() {
  static const auto* const v = new std::vector<std::pair<std::string, std::string>>{
      // A missing fence mark starts at max(TIME in us, marker x 1000) under a
      // marker that is not trusted: the clocks of the fake and the server
      // differ, so the fuzzed marker lies in the future (year 2223), where
      // marker x 1000 decides; DataSetMarkerCreatedOnFirstContactAgrees
      // compares the TIME start with a tolerance.
      {"m:began-trusted", "0"}, {"m:began-future", "8000000000000"}, {"m:began-bad", "abc"}};
  return *v;
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {
    for (const NamedScript& s : AllScripts()) dlock_scripts_.push_back(s);
  }

  Argv Next() {
    switch (Pick(100)) {
      case 0: case 1: case 2: case 3: case 4: case 5: case 6:
        return {Case("GET"), Key()};
      case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14:
        return Set();
      case 15:
        return {Case("SETNX"), Key(), Value()};
      case 16:
        return {Case("GETDEL"), Key()};
      case 17: case 18:
        return Multi(Case("DEL"));
      case 19: case 20:
        return Multi(Case("EXISTS"));
      case 21: case 22:
        return {Case("INCR"), Key()};
      case 23:
        return {Case("DECR"), Key()};
      case 24: case 25:
        return {Case("INCRBY"), Key(), One(Integers())};
      case 26:
        return {Case("DECRBY"), Key(), One(Integers())};
      case 27: case 28: case 29:
        return Expire(Case("PEXPIRE"), /*seconds=*/false);
      case 30: case 31:
        return Expire(Case("EXPIRE"), /*seconds=*/true);
      case 32: case 33:
        return {Case("PTTL"), Key()};
      case 34:
        return {Case("TTL"), Key()};
      case 35:
        return {Case("PERSIST"), Key()};
      case 36:
        return {Case("TYPE"), Key()};
      case 37: case 38: case 39: case 40:
        return HSet();
      case 41: case 42:
        return {Case("HGET"), Key(), Field()};
      case 43:
        return Multi(Case("HDEL"), /*with_fields=*/true);
      case 44:
        return {Case("HEXISTS"), Key(), Field()};
      case 45: case 46:
        return {Case("HINCRBY"), Key(), Field(), One(Integers())};
      case 47:
        return {Case("HLEN"), Key()};
      case 48: case 49:
        return {Case("HGETALL"), Key()};
      case 50:
        return {Case("PUBLISH"), One({"ch", "{r}lock:released", ""}), Value()};
      case 51:
        return Pick(2) ? Argv{Case("PING")} : Argv{Case("PING"), Value()};
      case 52:
        return {Case("ECHO"), Value()};
      case 53:
        return {Case("DBSIZE")};
      case 54: case 55: case 56: case 57: case 58: case 59: case 60:
        return Eval();
      case 61: case 62: case 63: case 64: case 65: case 66: case 67: case 68: case 69:
        return DlockScript();
      case 70: case 71:
        return EvalSha();
      case 72:
        return {Case("SCRIPT"), Case("LOAD"), OneScript().body};
      case 73:
        return ScriptExists();
      case 74:
        return Pick(20) == 0 ? Argv{Case("SCRIPT"), Case("FLUSH")}
                             : Argv{Case("SCRIPT"), Case("FLUSH"), One({"sync", "ASYNC", "x"})};
      case 75: case 76: case 77: case 78: case 79:
        return WrongArity();
      case 80: case 81: case 82:
        return Unknown();
      case 83:
        return BadSubcommand();
      case 84:
        return Pick(10) == 0 ? Argv{Case("FLUSHALL")}
                             : Argv{Case("FLUSHALL"), One({"sync", "ASYNC", "bogus"})};
      case 85:
        return {Case("TIME")};
      case 86:
        return {Case("INFO"), "nosuchsection"};
      case 87: case 88: case 89: case 90:
        return ZAdd();
      case 91:
        return {Case("ZINCRBY"), Key(), One(Scores()), One(Members())};
      case 92:
        return Multi(Case("ZREM"), /*with_fields=*/false, /*members=*/true);
      case 93:
        return Pick(2) ? Argv{Case("ZCARD"), Key()}
                       : Argv{Case(Pick(2) ? "ZSCORE" : "ZRANK"), Key(), One(Members())};
      case 94: case 95:
        return ZRange();
      case 96:
        return {Case("ZREMRANGEBYSCORE"), Key(), One(RangeEnds()), One(RangeEnds())};
      case 97:
        return {Case("ZREMRANGEBYRANK"), Key(), One(Integers()), One(Integers())};
      case 98:
        return Pick(2) ? Argv{Case("ZPOPMIN"), Key()}
                       : Pick(6) == 0 ? Argv{Case("ZPOPMIN"), Key(), "1", "2"}
                                      : Argv{Case("ZPOPMIN"), Key(), One(Integers())};
      default:
        return Set();
    }
  }

 private:
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  const std::string& One(const std::vector<std::string>& v) { return v[Pick(v.size())]; }
  std::string One(std::initializer_list<const char*> v) {
    return *(v.begin() + Pick(v.size()));
  }
  std::string Key() { return One(Keys()); }
  std::string Value() { return One(Values()); }
  // A long TTL from one of the buckets, 100 ms (PX) or 1 s (EX) more than
  // the previous one of its unit: re-applying a bucket always moves the
  // expiry later by far more than the fake's and the real server's clocks
  // can disagree, so GT/LT decide the same on both. The growth stops short
  // of the next bucket (at 900 s), far beyond what 5,000 commands use;
  // only much longer hunts can tie again.
  std::string LongTtl(bool seconds) {
    if (seconds) {
      ex_steps_ = std::min<int64_t>(ex_steps_ + 1, 900);
      return absl::StrCat(std::stoll(One(LongEx())) + ex_steps_);
    }
    px_steps_ = std::min<int64_t>(px_steps_ + 1, 9000);
    return absl::StrCat(std::stoll(One(LongPx())) + 100 * px_steps_);
  }
  std::string Field() { return One(Fields()); }

  // Command names in random case now and then.
  std::string Case(std::string name) {
    if (Pick(8) != 0) return name;
    for (char& c : name) {
      if (Pick(2)) c = static_cast<char>(c ^ 0x20);
    }
    return name;
  }

  std::string Ttl(bool seconds) {
    if (Pick(4) == 0) return One(BadTtls());
    return LongTtl(seconds);
  }

  Argv Set() {
    Argv argv = {Case("SET"), Key(), Value()};
    const size_t options = Pick(4);
    for (size_t i = 0; i < options; ++i) {
      switch (Pick(10)) {
        case 0: argv.push_back(Case("NX")); break;
        case 1: argv.push_back(Case("XX")); break;
        case 2: argv.push_back(Case("GET")); break;
        case 3: argv.push_back(Case("KEEPTTL")); break;
        case 4: case 5:
          argv.push_back(Case("PX"));
          if (Pick(10) != 0) argv.push_back(Ttl(false));
          break;
        case 6:
          argv.push_back(Case("EX"));
          if (Pick(10) != 0) argv.push_back(Ttl(true));
          break;
        case 7:
          argv.push_back(Case("EXAT"));
          // Never in the past: redis-server keeps such a key (expired,
          // invisible) until its expiry cycle finds it, so DBSIZE would
          // depend on timing.
          argv.push_back(One({"4102444800", "4102444900", "0", "abc"}));
          break;
        case 8:
          argv.push_back(Case("PXAT"));
          argv.push_back(One({"4102444800000", "-1", "x"}));
          break;
        default:
          argv.push_back(One({"bogus", "N", "PXX"}));
      }
    }
    return argv;
  }

  Argv Expire(std::string name, bool seconds) {
    std::string ttl;
    switch (Pick(6)) {
      case 0: ttl = One({"0", "-1", "-100"}); break;
      case 1: ttl = One(BadTtls()); break;
      default: ttl = LongTtl(seconds);
    }
    Argv argv = {name, Key(), ttl};
    const size_t options = Pick(10) < 6 ? 0 : 1 + Pick(2);
    for (size_t i = 0; i < options; ++i) {
      argv.push_back(Case(One({"NX", "XX", "GT", "LT", "bogus"})));
    }
    return argv;
  }

  Argv Multi(std::string name, bool with_fields = false, bool members = false) {
    Argv argv = {name, Key()};
    const size_t n = 1 + Pick(3);
    for (size_t i = 0; i < n; ++i) {
      argv.push_back(members ? One(Members()) : with_fields ? Field() : Key());
    }
    return argv;
  }

  Argv ZAdd() {
    Argv argv = {Case("ZADD"), Key()};
    if (Pick(2)) {
      const size_t options = 1 + Pick(2);
      for (size_t i = 0; i < options; ++i) {
        argv.push_back(Case(One({"NX", "XX", "GT", "LT", "CH", "INCR", "CH"})));
      }
    }
    const size_t pairs = 1 + Pick(3);
    for (size_t i = 0; i < pairs; ++i) {
      argv.push_back(Pick(6) == 0 ? One(Scores()) : One({"1", "2", "3", "-1", "1.5", "1.1"}));
      argv.push_back(One(Members()));
    }
    if (Pick(12) == 0) argv.pop_back();  // odd count: syntax error
    return argv;
  }

  // ZRANGE (index or BYSCORE, REV, LIMIT, WITHSCORES) and ZRANGEBYSCORE.
  Argv ZRange() {
    const bool by_score_command = Pick(3) == 0;
    Argv argv = {Case(by_score_command ? "ZRANGEBYSCORE" : "ZRANGE"), Key()};
    bool by_score = by_score_command;
    if (!by_score_command && Pick(2)) by_score = true;
    if (by_score) {
      argv.push_back(One(RangeEnds()));
      argv.push_back(One(RangeEnds()));
    } else {
      argv.push_back(Pick(2) ? One({"0", "1", "-1", "-2", "5", "-100"}) : One(Integers()));
      argv.push_back(Pick(2) ? One({"0", "1", "-1", "-2", "5", "-100"}) : One(Integers()));
    }
    if (by_score && !by_score_command) argv.push_back(Case("BYSCORE"));
    const size_t options = Pick(4);
    for (size_t i = 0; i < options; ++i) {
      switch (Pick(7)) {
        case 0: case 1: argv.push_back(Case("WITHSCORES")); break;
        case 2: case 3:
          argv.push_back(Case("LIMIT"));
          if (Pick(8) != 0) argv.push_back(One({"0", "1", "2", "-1", "abc", "10"}));
          if (Pick(8) != 0) argv.push_back(One({"1", "2", "-1", "0", "x", "100"}));
          break;
        case 4: argv.push_back(Case("REV")); break;
        case 5: argv.push_back(Case("BYSCORE")); break;
        default: argv.push_back(One({"bogus", "WITHSCORE"}));
      }
    }
    return argv;
  }

  Argv HSet() {
    Argv argv = {Case("HSET"), Key()};
    const size_t pairs = 1 + Pick(3);
    for (size_t i = 0; i < pairs; ++i) {
      argv.push_back(Field());
      argv.push_back(One(HashValues()));
    }
    if (Pick(10) == 0) argv.pop_back();  // odd count: arity error
    return argv;
  }

  const ScriptCase& OneScript() { return ScriptPool()[Pick(ScriptPool().size())]; }

  void AddKeysAndArgs(Argv* argv, const ScriptCase& s) {
    const bool safe = s.safe_args_only;
    const size_t nkeys = Pick(3);
    const size_t nargs = Pick(4);
    switch (Pick(20)) {
      case 0: argv->push_back("-1"); break;
      case 1: argv->push_back("abc"); break;
      case 2: argv->push_back(absl::StrCat(nkeys + nargs + 1)); break;
      default: argv->push_back(absl::StrCat(nkeys));
    }
    for (size_t i = 0; i < nkeys; ++i) argv->push_back(Key());
    for (size_t i = 0; i < nargs; ++i) {
      if (s.hash_args) {
        argv->push_back(i % 2 == 0 ? Field() : One(HashValues()));
      } else if (s.ttl_args) {
        // A short positive TTL would leave an expired key that only
        // redis-server's expiry cycle removes (DBSIZE would race it).
        argv->push_back(Pick(3) == 0 ? One({"0", "-1", "abc", "NX"}) : LongTtl(false));
      } else if (safe) {
        argv->push_back(One(SafeArgs()));
      } else {
        switch (Pick(3)) {
          case 0: argv->push_back(Value()); break;
          case 1: argv->push_back(LongTtl(false)); break;
          default: argv->push_back(One(SafeArgs()));
        }
      }
    }
  }

  Argv Eval() {
    const ScriptCase& s = OneScript();
    Argv argv = {Case("EVAL"), s.body};
    AddKeysAndArgs(&argv, s);
    return argv;
  }

  Argv EvalSha() {
    const ScriptCase& s = OneScript();
    std::string sha = Sha1Hex(s.body);
    switch (Pick(8)) {
      case 0: sha = "abc"; break;
      case 1: for (char& c : sha) c = static_cast<char>(toupper(c)); break;
      default: break;
    }
    Argv argv = {Case("EVALSHA"), sha};
    AddKeysAndArgs(&argv, s);
    return argv;
  }

  Argv ScriptExists() {
    Argv argv = {Case("SCRIPT"), Case("EXISTS")};
    const size_t n = 1 + Pick(3);
    for (size_t i = 0; i < n; ++i) {
      std::string sha = Sha1Hex(OneScript().body);
      if (Pick(4) == 0) {
        for (char& c : sha) c = static_cast<char>(toupper(c));
      }
      argv.push_back(Pick(6) == 0 ? "nosuch" : sha);
    }
    return argv;
  }

  // One of dlock's own lock scripts, with plausible and implausible input.
  Argv DlockScript() {
    const NamedScript& s = dlock_scripts_[Pick(dlock_scripts_.size())];
    const bool sha = Pick(2) == 0;
    Argv argv = {sha ? "EVALSHA" : "EVAL", sha ? s.script->sha1() : s.script->source(),
                 absl::StrCat(s.num_keys)};
    const std::vector<std::string> lock_keys = {"{r}lock", "{r}lock", "k1", "h1", "n1"};
    // Reentrant acquire/undo share a per-request marker key; a few names so
    // an undo meets both its own marker and someone else's.
    const std::vector<std::string> marker_keys = {"{r}lock:acquire:1", "{r}lock:acquire:2"};
    const std::string name = s.name;
    if (absl::StartsWith(name, "read_") || absl::StartsWith(name, "write_")) {
      return ReadWriteScript(std::move(argv), name);
    }
    const bool acquire = name == "acquire" || name == "reentrant_acquire";
    argv.push_back(lock_keys[Pick(lock_keys.size())]);
    if (name == "reentrant_undo") {
      argv.push_back(marker_keys[Pick(marker_keys.size())]);
    }
    if (name == "reentrant_acquire") argv.push_back(marker_keys[Pick(marker_keys.size())]);
    // The data-set marker: only pre-set ones (DataSetMarkers(), re-set after
    // every FLUSHALL), since one created from TIME differs by the clocks'
    // skew (DataSetMarkerCreatedOnFirstContactAgrees covers creation).
    if (acquire) argv.push_back(DataSetMarkers()[Pick(DataSetMarkers().size())].first);
    // The fence high-water mark (a few names, one of another type).
    if (acquire) argv.push_back(One({"m:hwm", "m:hwm", "m:hwm2", "h2"}));
    argv.push_back(One({"tokA", "tokB", "ownerX"}));
    if (name == "release" || name == "reentrant_release" || name == "reentrant_undo") {
      argv.push_back(One({"{r}lock:released", "ch"}));
    } else {
      argv.push_back(Pick(12) == 0 ? One({"abc", "0", "-5"}) : LongTtl(false));
    }
    // The restart window: off, shorter than every marker's age, or longer
    // (a young refusal, whose ms are compared with a tolerance).
    if (acquire) argv.push_back(One({"0", "0", "60000", "99999999999999"}));
    return argv;
  }

  // The read-write lock's scripts (lock/read_write_scripts.h): the readers
  // hash and the writer-intent marker. The readers' expiries are server
  // time + ttl (the clocks differ by a few ms), so they are compared only
  // through the scripts' replies (TTLs far apart), never read back: the
  // readers key is not one of Keys().
  Argv ReadWriteScript(Argv argv, const std::string& name) {
    const std::string readers = "{r}lock:readers";
    if (name == "read_release" || name == "read_extend") {
      argv.push_back(readers);
      argv.push_back(One({"tokA", "tokB"}));
      argv.push_back(name == "read_release" ? One({"{r}lock:released", "ch"})
                                            : LongTtl(false));
      return argv;
    }
    argv.push_back(One({"{r}lock", "{r}lock", "k1", "h1"}));
    argv.push_back(readers);
    argv.push_back(One({"{r}lock:writer-waiting", "{r}lock:writer-waiting", "h2"}));
    argv.push_back(DataSetMarkers()[Pick(DataSetMarkers().size())].first);
    argv.push_back(One({"m:hwm", "m:hwm", "m:hwm2"}));
    argv.push_back(One({"tokA", "tokB"}));
    argv.push_back(LongTtl(false));
    argv.push_back(One({"0", "0", "60000"}));
    if (name != "read_acquire") argv.push_back(One({"0", "3000", "60000"}));
    // The writer's rare path: the transaction's fence (0: INCR failed).
    if (name == "write_after_tx") argv.push_back(One({"0", "1", "2", "7"}));
    return argv;
  }

  Argv WrongArity() {
    static const auto* const commands = new std::vector<Argv>{
        {"GET"}, {"GET", "a", "b"}, {"SET", "k"}, {"SET"}, {"DEL"}, {"EXISTS"}, {"INCR"},
        {"INCRBY", "k"}, {"INCRBY", "k", "1", "2"}, {"DECRBY", "k"}, {"PEXPIRE", "k"},
        {"EXPIRE"}, {"PTTL"}, {"TTL", "a", "b"}, {"HSET", "h", "f"}, {"HSET", "h"},
        {"HGET", "h"}, {"HDEL", "h"}, {"HEXISTS", "h"}, {"HINCRBY", "h", "f"}, {"HLEN"},
        {"HGETALL", "a", "b"}, {"PUBLISH", "c"}, {"EVAL", "return 1"}, {"EVALSHA", "abc"},
        {"SCRIPT"}, {"SCRIPT", "LOAD"}, {"SCRIPT", "EXISTS"}, {"PING", "a", "b"},
        {"TIME", "x"}, {"DBSIZE", "x"}, {"ECHO"}, {"SETNX", "k"}, {"GETDEL"}, {"TYPE"},
        {"PERSIST", "a", "b"}, {"SCRIPT", "LOAD", "return 1", "extra"}, {"ZADD", "z1"},
        {"ZADD", "z1", "1"}, {"ZINCRBY", "z1", "1"}, {"ZREM", "z1"}, {"ZCARD"},
        {"ZSCORE", "z1"}, {"ZRANK", "z1", "a", "b"}, {"ZRANGE", "z1", "0"},
        {"ZRANGEBYSCORE", "z1"}, {"ZREMRANGEBYSCORE", "z1", "1"},
        {"ZREMRANGEBYRANK", "z1", "0", "1", "2"}, {"ZPOPMIN"}};
    Argv argv = (*commands)[Pick(commands->size())];
    argv[0] = Case(argv[0]);
    return argv;
  }

  Argv Unknown() {
    static const auto* const names = new std::vector<std::string>{
        "foo", "GETX", "hsetx", "", "x\r\ny", "LPUSH2", std::string("g\0et", 4)};
    Argv argv = {One(*names)};
    const size_t n = Pick(4);
    for (size_t i = 0; i < n; ++i) {
      argv.push_back(Pick(5) == 0 ? std::string(90 + Pick(60), 'z') : Value());
    }
    return argv;
  }

  Argv BadSubcommand() {
    Argv argv = {Case("SCRIPT"), One({"foo", "KILLALL", "x\r\ny", std::string(200, 's')})};
    if (Pick(2)) argv.push_back(Value());
    return argv;
  }

  std::mt19937_64 rng_;
  int64_t px_steps_ = 0;
  int64_t ex_steps_ = 0;
  std::vector<NamedScript> dlock_scripts_;
};

// ---------------------------------------------------------------------------
// The comparison.

absl::StatusOr<int64_t> ServerTimeMicros(test_support::RedisServer& server) {
  absl::StatusOr<Reply> t = server.Command({"TIME"});
  if (!t.ok()) return t.status();
  int64_t sec = 0, usec = 0;
  if (!t->is_array() || t->elements.size() != 2 || !absl::SimpleAtoi(t->elements[0].str, &sec) ||
      !absl::SimpleAtoi(t->elements[1].str, &usec)) {
    return absl::InternalError("bad TIME reply: " + t->DebugString());
  }
  return sec * 1000000 + usec;
}

// Whether two replies agree; for time-dependent commands, within tolerance.
bool Agree(const Argv& argv, const Reply& fake, const Reply& real) {
  std::string name = argv[0];
  for (char& c : name) c = static_cast<char>(tolower(c));
  if (name == "time" && argv.size() == 1) {
    return fake.is_array() && real.is_array() && fake.elements.size() == 2 &&
           real.elements.size() == 2;
  }
  // A young data set's refusal: {'young', ms left, age ms}, time-dependent.
  if ((name == "eval" || name == "evalsha") && fake.is_array() && real.is_array() &&
      fake.elements.size() == 3 && real.elements.size() == 3 &&
      fake.elements[0] == Reply::String("young") && real.elements[0] == fake.elements[0] &&
      fake.elements[1].is_integer() && real.elements[1].is_integer() &&
      fake.elements[2].is_integer() && real.elements[2].is_integer()) {
    return std::llabs(fake.elements[1].integer - real.elements[1].integer) <= 50 &&
           std::llabs(fake.elements[2].integer - real.elements[2].integer) <= 50;
  }
  if ((name == "pttl" || name == "ttl") && argv.size() == 2 && fake.is_integer() &&
      real.is_integer() && fake.integer >= 0 && real.integer >= 0) {
    const int64_t tolerance = name == "pttl" ? 50 : 1;
    return std::llabs(fake.integer - real.integer) <= tolerance;
  }
  return fake == real;
}

// A fresh real redis-server and a FakeRedis beside it whose clock follows
// the server's TIME: where every comparison below starts.
class FakeBesideReal {
 public:
  // Starts the server -- `untouched`: with no trusted data-set marker (the
  // fake has none) -- and starts the fake's clock at the server's time.
  absl::Status Start(bool untouched) {
    test_support::RedisServerOptions server_options;
    if (untouched) server_options.trusted_data_set_prefixes.clear();
    absl::StatusOr<std::unique_ptr<test_support::RedisServer>> server =
        test_support::RedisServer::Start(server_options);
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    absl::StatusOr<int64_t> t0 = ServerTimeMicros(*server_);
    if (!t0.ok()) return t0.status();
    t0_ = now_ = *t0;
    FakeRedis::Options options;
    options.start_time = absl::FromUnixMicros(*t0);
    fake_ = std::make_unique<FakeRedis>(&loop_, options);
    return absl::OkStatus();
  }

  struct Replies {
    Reply fake;
    Reply real;
  };
  // Keeps the fake's clock on the server's, then runs `argv` on the real
  // server and on the fake. An error: no TIME or no reply from the server.
  absl::StatusOr<Replies> Run(const Argv& argv) {
    absl::StatusOr<int64_t> now = ServerTimeMicros(*server_);
    if (!now.ok()) return now.status();
    now_ = *now;
    loop_.AdvanceTo(ManualEventLoop::Origin() + absl::Microseconds(now_ - t0_));
    absl::StatusOr<Reply> real = server_->Command(argv);
    if (!real.ok()) return real.status();
    return Replies{fake_->Execute(argv), *std::move(real)};
  }

  // Set-up on both sides (SET, SCRIPT LOAD): the fake's reply is not
  // compared; the server's must come.
  absl::Status Both(const Argv& argv) {
    fake_->Execute(argv);
    return server_->Command(argv).status();
  }
  // The trusted data-set markers, on both.
  absl::Status SetMarkers() {
    for (const auto& [key, value] : DataSetMarkers()) {
      absl::Status s = Both({"SET", key, value});
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  test_support::RedisServer& server() { return *server_; }
  FakeRedis& fake() { return *fake_; }
  // The server's time at Start and at the last Run, in microseconds.
  int64_t start_micros() const { return t0_; }
  int64_t now_micros() const { return now_; }

 private:
  std::unique_ptr<test_support::RedisServer> server_;
  ManualEventLoop loop_;
  std::unique_ptr<FakeRedis> fake_;
  int64_t t0_ = 0;
  int64_t now_ = 0;
};

// The last 8 steps of a run ("#i argv -> fake's reply"), for a failure's
// message.
class RecentSteps {
 public:
  void Add(int64_t i, const Argv& argv, const Reply& mine) {
    steps_.push_back(absl::StrCat("#", i, " ", Render(argv), " -> ", mine.DebugString()));
    if (steps_.size() > 8) steps_.pop_front();
  }
  std::string Joined() const { return absl::StrJoin(steps_, "\n    "); }

 private:
  std::deque<std::string> steps_;
};

// Step `i` of a random walk: `argv` on both sides (FakeBesideReal::Run),
// the fake's reply in `*mine`. A failure (no reply, or replies that do not
// Agree) names the step, both replies and the `recent` steps before it.
::testing::AssertionResult RunAgreeing(FakeBesideReal& pair, int64_t i, const Argv& argv,
                                       const RecentSteps& recent, Reply* mine) {
  absl::StatusOr<FakeBesideReal::Replies> replies = pair.Run(argv);
  if (!replies.ok()) {
    return ::testing::AssertionFailure() << Render(argv) << ": " << replies.status();
  }
  *mine = replies->fake;
  if (Agree(argv, replies->fake, replies->real)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "#" << i << " " << Render(argv) << "\n  fake: " << replies->fake.DebugString()
         << "\n  real: " << replies->real.DebugString() << "\n  previous:\n    "
         << recent.Joined();
}

struct RunResult {
  int64_t commands = 0;
  bool ok = true;
};

RunResult RunSeed(uint64_t seed, int64_t count) {
  RunResult result;
  // An untouched server: no trusted data-set marker (the fake has none).
  FakeBesideReal pair;
  if (absl::Status s = pair.Start(/*untouched=*/true); !s.ok()) {
    ADD_FAILURE() << "cannot start redis-server: " << s;
    result.ok = false;
    return result;
  }
  Generator gen(seed);
  RecentSteps recent;
  auto set_markers = [&]() -> bool { return pair.SetMarkers().ok(); };
  if (!set_markers()) {
    ADD_FAILURE() << "cannot set the data-set markers";
    result.ok = false;
    return result;
  }

  for (int64_t i = 0; i < count; ++i) {
    Argv argv = gen.Next();
    absl::StatusOr<FakeBesideReal::Replies> replies = pair.Run(argv);
    ++result.commands;
    if (!replies.ok()) {
      ADD_FAILURE() << "seed " << seed << ", command #" << i << " " << Render(argv)
                    << ": the real server did not answer: " << replies.status() << "\n"
                    << pair.server().LogTail();
      result.ok = false;
      return result;
    }
    const Reply& mine = replies->fake;
    const Reply* real = &replies->real;
    if (!Agree(argv, mine, *real)) {
      ADD_FAILURE() << "FakeRedis differs from redis-server.\n"
                    << "  seed " << seed << ", first differing command #" << i << ": "
                    << Render(argv) << "\n"
                    << "  fake: " << mine.DebugString() << "\n"
                    << "  real: " << real->DebugString() << "\n"
                    << "  previous commands:\n    " << recent.Joined() << "\n"
                    << "  replay: DLOCK_DIFFERENTIAL_SEED=" << seed
                    << " DLOCK_DIFFERENTIAL_COMMANDS=" << (i + 1);
      result.ok = false;
      return result;
    }
    if (absl::AsciiStrToLower(argv[0]) == "flushall" && !set_markers()) {
      ADD_FAILURE() << "cannot set the data-set markers after FLUSHALL";
      result.ok = false;
      return result;
    }
    recent.Add(i, argv, mine);
  }
  return result;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t out = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) return fallback;
  return out;
}

TEST(DifferentialTest, RandomCommandSequencesGetIdenticalRepliesFromFakeAndRealRedis) {
  const int64_t count = EnvInt("DLOCK_DIFFERENTIAL_COMMANDS", 5000);
  std::vector<uint64_t> seeds;
  for (int64_t s = 1; s <= EnvInt("DLOCK_DIFFERENTIAL_SEEDS", 8); ++s) seeds.push_back(s);
  const int64_t one = EnvInt("DLOCK_DIFFERENTIAL_SEED", -1);
  if (one >= 0) seeds = {static_cast<uint64_t>(one)};
  int64_t total = 0;
  for (uint64_t seed : seeds) {
    RunResult r = RunSeed(seed, count);
    total += r.commands;
    if (!r.ok) break;
  }
  if (one < 0 && !HasFailure()) {
    EXPECT_GE(total, 20000);
  }
  std::printf("differential: %lld commands compared over %zu seed(s)\n",
              static_cast<long long>(total), seeds.size());
}

// The generator must exercise what it claims to: every dlock script and the
// error paths show up in the default run (a guard against a generator that
// silently stopped producing them).
TEST(DifferentialTest, GeneratorCoversScriptsAndBadInput) {
  Generator gen(1);
  int dlock = 0, unknown = 0, arity = 0, eval = 0, zset = 0;
  for (int i = 0; i < 4000; ++i) {
    Argv a = gen.Next();
    for (const NamedScript& s : AllScripts()) {
      if (a.size() > 1 && (a[1] == s.script->sha1() || a[1] == s.script->source())) ++dlock;
    }
    if (a[0] == "foo" || a[0] == "GETX" || a[0].empty()) ++unknown;
    if (a.size() == 1 && a[0] == "GET") ++arity;
    if (a[0] == "EVAL") ++eval;
    if (absl::StartsWithIgnoreCase(a[0], "Z")) ++zset;
  }
  EXPECT_GT(zset, 300);
  EXPECT_GT(dlock, 200);
  EXPECT_GT(unknown, 20);
  EXPECT_GT(arity, 0);
  EXPECT_GT(eval, 100);
}

std::string DlockSource(absl::string_view name) {
  for (const NamedScript& s : AllScripts()) {
    if (name == s.name) return s.script->source();
  }
  ADD_FAILURE() << "no script " << name;
  return std::string();
}

std::string DlockSha(absl::string_view name) {
  for (const NamedScript& s : AllScripts()) {
    if (name == s.name) return s.script->sha1();
  }
  ADD_FAILURE() << "no script " << name;
  return std::string();
}

// Runs `commands` on a fresh real server and a fresh fake, reply for reply.
// With `deny_channels`, the real server's default user (the helper's
// connection) gets `resetchannels` and the fake FakeRedis::DenyChannels.
void CompareFixed(const std::vector<Argv>& commands, bool deny_channels) {
  FakeBesideReal pair;
  ASSERT_THAT(pair.Start(/*untouched=*/false), IsOk());
  if (deny_channels) {
    absl::StatusOr<Reply> acl =
        pair.server().Command({"ACL", "SETUSER", "default", "resetchannels"});
    ASSERT_TRUE(acl.ok()) << acl.status();
    ASSERT_EQ(*acl, Reply::Status("OK"));
  }
  pair.fake().DenyChannels(deny_channels);
  for (size_t i = 0; i < commands.size(); ++i) {
    const Argv& argv = commands[i];
    absl::StatusOr<FakeBesideReal::Replies> replies = pair.Run(argv);
    ASSERT_TRUE(replies.ok()) << Render(argv) << ": " << replies.status();
    const Reply& mine = replies->fake;
    const Reply* real = &replies->real;
    EXPECT_EQ(mine, *real) << "#" << i << " " << Render(argv) << "\n  fake: "
                           << mine.DebugString() << "\n  real: " << real->DebugString();
  }
}

// An ACL user without channel permission (issue 11): FakeRedis::DenyChannels
// must answer like a real server whose user has `resetchannels`, for plain
// PUBLISH/SUBSCRIBE, PUBLISH inside scripts (call and pcall; no rollback of
// earlier writes), and every dlock release script (which pcall the PUBLISH
// after the DEL and return the refusal's text), the fair lock's included.
TEST(DifferentialTest, ChannelAclRefusalsMatchARealServer) {
  const std::vector<Argv> commands = {
      {"PUBLISH", "ch", "m"},
      {"SUBSCRIBE", "ch"},
      {"PUBLISH", "ch"},  // arity first
      {"EVAL", "return redis.call('publish', ARGV[1], 'm')", "0", "ch"},
      {"EVAL", "return redis.pcall('publish', ARGV[1], 'm')", "0", "ch"},
      {"EVAL", "local r = redis.pcall('publish', ARGV[1], 'm') return {type(r), r.err}", "0",
       "ch"},
      {"EVAL", "redis.call('set', KEYS[1], 'v') return redis.call('publish', ARGV[1], 'm')",
       "1", "k1", "ch"},
      {"GET", "k1"},
      {"EVAL", "#!lua flags=no-writes\nreturn redis.call('publish', ARGV[1], 'm')", "0", "ch"},
      {"EVAL", "return redis.call('subscribe', ARGV[1])", "0", "ch"},
      // SimpleLock / RedLock release.
      {"SET", "{r}lock", "tokA", "PX", "100000"},
      {"EVAL", DlockSource("release"), "1", "{r}lock", "tokA", "{r}lock:released"},
      {"EXISTS", "{r}lock"},
      {"EVAL", DlockSource("release"), "1", "{r}lock", "tokA", "{r}lock:released"},
      {"SET", "{r}lock", "tokB", "PX", "100000"},
      {"EVALSHA", DlockSha("release"), "1", "{r}lock", "tokB", "{r}lock:released"},
      {"EXISTS", "{r}lock"},
      // Reentrant release: only the last hold publishes.
      {"HSET", "{r}lock", "ownerX", "2"},
      {"PEXPIRE", "{r}lock", "100000"},
      {"EVAL", DlockSource("reentrant_release"), "1", "{r}lock", "ownerX", "{r}lock:released"},
      {"EVAL", DlockSource("reentrant_release"), "1", "{r}lock", "ownerX", "{r}lock:released"},
      {"EXISTS", "{r}lock"},
      // Reentrant undo of the last hold.
      {"SET", "{r}lock:acquire:1", "1", "PX", "100000"},
      {"HSET", "{r}lock", "ownerX", "1"},
      {"PEXPIRE", "{r}lock", "100000"},
      {"EVAL", DlockSource("reentrant_undo"), "2", "{r}lock", "{r}lock:acquire:1", "ownerX",
       "{r}lock:released"},
      {"EXISTS", "{r}lock"},
      {"EXISTS", "{r}lock:acquire:1"},
      // Fair release with a live head to notify: the lock is deleted and
      // the refusal's text returned; a fair acquire that finds the lock free
      // behind another head notifies it too (refusal ignored, still queued).
      {"SET", "{r}lock", "tokA", "PX", "100000"},
      {"HSET", "{r}lock:queue", "#next", "1", "i1:1", "1:99999999999999"},
      {"EVAL", FairReleaseScript().source(), "2", "{r}lock", "{r}lock:queue", "tokA", "",
       "w:"},
      {"EXISTS", "{r}lock"},
      {"HGETALL", "{r}lock:queue"},
      {"EVAL", FairAcquireScript().source(), "4", "{r}lock", "m:began",
       "{r}lock:queue", "m:hwm", "tokB", "100000", "0", "i2:1", "99999999999", "w:"},
      {"HLEN", "{r}lock:queue"},
      {"EXISTS", "{r}lock"},
  };
  CompareFixed(commands, /*deny_channels=*/true);
}

// Sorted sets: the option rules, score parsing and printing (%.17g, -0,
// infinities), ranges, LIMIT, expiry and script use, compared reply for reply
// with a real server (the cases fake_redis_zsets_test.cc asserts).
TEST(DifferentialTest, SortedSetEdgeCasesMatchARealServer) {
  const std::string script =
      "redis.call('zadd', KEYS[1], 1, 'a', 2.5, 'b') "
      "redis.call('zremrangebyscore', KEYS[1], '-inf', 1) "
      "return {redis.call('zcard', KEYS[1]), redis.call('zrange', KEYS[1], 0, -1, "
      "'withscores'), redis.call('zscore', KEYS[1], 'a')}";
  const std::vector<Argv> commands = {
      {"ZADD", "z", "2", "b", "1", "c", "1", "a", "2", "B"},
      {"ZRANGE", "z", "0", "-1", "WITHSCORES"},
      {"ZRANK", "z", "B"},
      {"TYPE", "z"},
      {"ZADD", "y", "XX", "1", "a"},
      {"EXISTS", "y"},
      {"ZADD", "z", "GT", "CH", "4", "a", "1", "x"},
      {"ZADD", "z", "LT", "8", "a"},
      {"ZADD", "z", "XX", "CH", "2", "a", "3", "q"},
      {"ZADD", "z", "INCR", "1.5", "a"},
      {"ZADD", "z", "INCR", "GT", "-1", "a"},
      {"ZADD", "z", "NX", "XX", "1", "a"},
      {"ZADD", "z", "GT", "LT", "1", "a"},
      {"ZADD", "z", "INCR", "1", "a", "2", "b"},
      {"ZADD", "f", "1.1", "a", "-inf", "b", "+inf", "c", "0x10", "d", "1e-320", "e"},
      {"ZRANGE", "f", "0", "-1", "WITHSCORES"},
      {"ZADD", "f", "nan", "x"},
      {"ZADD", "f", "1e-400", "x"},
      {"ZINCRBY", "f", "-inf", "c"},
      {"ZINCRBY", "n", "-0", "a"},
      {"ZSCORE", "n", "a"},
      {"SET", "s", "v"},
      {"ZADD", "s", "abc", "m"},
      {"ZADD", "s", "1", "m"},
      {"ZRANGEBYSCORE", "s", "x", "1"},
      {"ZPOPMIN", "s", "abc"},
      {"ZPOPMIN", "s", "0"},
      {"ZRANGEBYSCORE", "z", "(1", "3"},
      {"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"},
      {"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "-1", "WITHSCORES"},
      {"ZRANGE", "z", "(4", "1", "BYSCORE", "REV", "LIMIT", "0", "2"},
      {"ZRANGE", "z", "0", "1", "LIMIT", "0", "-1"},
      {"ZRANGE", "z", "0", "1", "LIMIT", "0", "1"},
      {"ZRANGE", "z", "-2", "-1", "REV"},
      {"ZREMRANGEBYRANK", "z", "-1", "-1"},
      {"ZREMRANGEBYSCORE", "z", "", "(2"},
      {"ZPOPMIN", "z", "2"},
      {"PEXPIRE", "z", "100000"},
      {"ZADD", "z", "7", "w"},
      {"TTL", "z"},
      {"EVAL", script, "1", "e"},
      {"EVAL", "return redis.pcall('zrangebyscore', KEYS[1], 'x', 1)", "1", "e"},
      {"EVAL", "return redis.call('zadd', KEYS[1], 'x', 'm')", "1", "e"},
  };
  CompareFixed(commands, /*deny_channels=*/false);
}

// The semaphore's scripts (lock/semaphore_scripts.h; not in AllScripts(),
// since their scores are server times): a seeded random sequence of
// acquires (1-3 permits, markers trusted/old/bad, restart windows),
// releases and extends by a few tokens, with foreign data, members already
// expired (ZADD with a past score: the trim must remove them on both) and
// inspection (ZCARD, ZRANGE without scores, TYPE, PTTL within 50 ms, the
// fence). TTLs are long and distinct, so both servers order the holders
// alike.
TEST(DifferentialTest, SemaphoreScriptsMatchARealServer) {
  FakeBesideReal pair;
  ASSERT_THAT(pair.Start(/*untouched=*/true), IsOk());
  ASSERT_THAT(pair.SetMarkers(), IsOk());
  std::string acquire, release, extend;
  for (const NamedScript& s : SemaphoreScripts()) {
    const std::string name = s.name;
    if (name == "semaphore_acquire") acquire = s.script->sha1();
    if (name == "semaphore_release") release = s.script->sha1();
    if (name == "semaphore_extend") extend = s.script->sha1();
    ASSERT_THAT(pair.Both({"SCRIPT", "LOAD", s.script->source()}), IsOk());
  }
  std::mt19937_64 rng(EnvInt("DLOCK_DIFFERENTIAL_SEED", 1));
  auto pick = [&](std::vector<std::string> v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  const std::vector<std::string> keys = {"{s}pool", "{s}pool", "{s}pool", "{s}other"};
  const std::vector<std::string> tokens = {"tokA", "tokB", "tokC", "tokD", "tokE"};
  int64_t step_ttl = 0;
  auto ttl = [&]() { return absl::StrCat(1000000 + 100 * (++step_ttl)); };
  int granted = 0, full = 0, trimmed = 0;
  RecentSteps recent;
  for (int i = 0; i < EnvInt("DLOCK_DIFFERENTIAL_COMMANDS", 3000); ++i) {
    const std::string key = pick(keys);
    Argv argv;
    switch (std::uniform_int_distribution<int>(0, 13)(rng)) {
      case 0: case 1: case 2: case 3: {
        const auto& marker =
            DataSetMarkers()[std::uniform_int_distribution<size_t>(0, 9)(rng) % 3 == 0
                                 ? std::uniform_int_distribution<size_t>(0, 2)(rng)
                                 : 0];
        argv = {"EVALSHA", acquire, "3", key, marker.first, "m:hwm", pick(tokens),
                ttl(), pick({"0", "0", "0", "60000"}), pick({"1", "2", "3", "3"})};
        break;
      }
      case 4: case 5:
        argv = {"EVALSHA", release, "1", key, pick(tokens), pick({"ch", key + ":released"})};
        break;
      case 6: case 7:
        argv = {"EVALSHA", extend, "1", key, pick(tokens), ttl()};
        break;
      case 8:
        argv = {"ZADD", key, pick({"1000", "1700000000000"}), pick(tokens)};  // expired
        ++trimmed;
        break;
      case 9:
        argv = {"ZCARD", key};
        break;
      case 10:
        argv = {"ZRANGE", key, "0", "-1"};
        break;
      case 11:
        argv = {pick({"TYPE", "PTTL", "GET"}), pick({key, key + ":fence"})};
        break;
      case 12:
        argv = pick({"a", "b", "c", "d", "e", "f"}) == "a"
                   ? Argv{"SET", key, "x", "PX", "5000000"}
                   : Argv{"DEL", key, key + ":fence"};
        break;
      default:
        argv = {"HSET", key, "f", "1"};
    }
    Reply mine;
    ASSERT_TRUE(RunAgreeing(pair, i, argv, recent, &mine));
    if (argv[1] == acquire && mine.is_integer()) ++granted;
    if (argv[1] == acquire && mine.is_nil()) ++full;
    recent.Add(i, argv, mine);
  }
  // The run met both outcomes of an acquire many times.
  EXPECT_GT(granted, 50);
  EXPECT_GT(full, 50);
  EXPECT_GT(trimmed, 50);
}

// The Redis fenced store's script (fenced/redis_store_script.h): a seeded
// random sequence of fenced writes (fences 1-6 on two resources, 0-3
// operations of every verb, floors, TTLs far away) with foreign data in the
// data keys and the fence records, and inspection of both.
TEST(DifferentialTest, FencedWriteScriptMatchesARealServer) {
  FakeBesideReal pair;
  ASSERT_THAT(pair.Start(/*untouched=*/false), IsOk());
  const Script& script = fenced::FencedRedisWriteScript();
  ASSERT_THAT(pair.Both({"SCRIPT", "LOAD", script.source()}), IsOk());
  std::mt19937_64 rng(EnvInt("DLOCK_DIFFERENTIAL_SEED", 1));
  auto pick = [&](std::vector<std::string> v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  auto number = [&](int lo, int hi) {
    return absl::StrCat(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  int applied = 0, stale = 0, refused = 0;
  RecentSteps recent;
  for (int i = 0; i < EnvInt("DLOCK_DIFFERENTIAL_COMMANDS", 3000); ++i) {
    const std::string r = pick({"{a}", "{b}"});
    const std::string record = "f:" + r;
    Argv argv;
    switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
      case 0: case 1: case 2: case 3: case 4: case 5: {
        std::vector<std::string> data = {r + "x", r + "y", r + "z"};
        std::shuffle(data.begin(), data.end(), rng);
        const int n = std::uniform_int_distribution<int>(0, 3)(rng);
        argv = {"EVALSHA", script.sha1(), absl::StrCat(n + 1), record};
        for (int k = 0; k < n; ++k) argv.push_back(data[k]);
        argv.push_back(number(1, 6));
        for (int k = 0; k < n; ++k) {
          const std::string op = pick({"set", "hset", "incr", "incr", "del"});
          argv.push_back(op);
          if (op == "set") {
            argv.push_back(pick({"v", "12", ""}));
            argv.push_back(pick({"0", "0", "9000000"}));
          } else if (op == "hset") {
            argv.push_back("2");
            for (const char* f : {"f", "g"}) {
              argv.push_back(f);
              argv.push_back(number(0, 9));
            }
          } else if (op == "incr") {
            argv.push_back(number(-4, 4));
            argv.push_back(pick({"", "0", "-2"}));
          }
        }
        break;
      }
      case 6:
        argv = pick({"a", "b", "c"}) == "a" ? Argv{"HSET", r + pick({"x", "y"}), "f", "1"}
                                            : Argv{"SET", r + pick({"x", "y"}),
                                                   pick({"abc", "9007199254740993", "-0", "7"})};
        break;
      case 7:
        argv = pick({"a", "b", "c", "d"}) == "a"
                   ? Argv{"SET", record, pick({"zz", "3", "99999999999999999"})}
                   : Argv{"DEL", record, r + "x"};
        break;
      case 8:
        argv = {pick({"GET", "TYPE"}), pick({record, r + "x", r + "y", r + "z"})};
        break;
      default:
        argv = {"HGETALL", r + pick({"x", "y", "z"})};
    }
    Reply mine;
    ASSERT_TRUE(RunAgreeing(pair, i, argv, recent, &mine));
    if (argv[0] == "EVALSHA" && mine.is_array() && !mine.elements.empty()) {
      const std::string& tag = mine.elements[0].str;
      (tag == "applied" ? applied : tag == "stale" ? stale : refused)++;
    }
    recent.Add(i, argv, mine);
  }
  // The run met every kind of outcome many times.
  EXPECT_GT(applied, 100);
  EXPECT_GT(stale, 100);
  EXPECT_GT(refused, 50);
}

// The fair lock's keyspace after a step, the same on both servers: the
// types of the lock, fence and queue keys, the lock's token, the fence, both
// PTTLs (within 50 ms) and the queue hash field for field IN ORDER, each
// entry "ticket:expiry" with the ticket exact and the expiry (server time +
// queue ttl) within 50 ms. "" when they agree, else what differs.
std::string FairKeyspaceDiff(FakeRedis& fake, test_support::RedisServer& server,
                             const std::vector<std::string>& keys) {
  std::string diff;
  auto both = [&](const Argv& argv, Reply* mine, Reply* real) {
    *mine = fake.Execute(argv);
    absl::StatusOr<Reply> r = server.Command(argv);
    *real = r.ok() ? *r : Reply::Error(r.status().ToString());
  };
  for (const std::string& key : keys) {
    Reply mine, real;
    both({"TYPE", key}, &mine, &real);
    if (mine != real) {
      absl::StrAppend(&diff, "TYPE ", key, ": ", mine.DebugString(), " vs ", real.DebugString(),
                      "\n");
      continue;
    }
    const std::string type = mine.str;  // TYPE's status reply
    both({"PTTL", key}, &mine, &real);
    if (!Agree({"PTTL", key}, mine, real)) {
      absl::StrAppend(&diff, "PTTL ", key, ": ", mine.DebugString(), " vs ", real.DebugString(),
                      "\n");
    }
    if (type == "string") {
      both({"GET", key}, &mine, &real);
      if (mine != real) {
        absl::StrAppend(&diff, "GET ", key, ": ", mine.DebugString(), " vs ",
                        real.DebugString(), "\n");
      }
    } else if (type == "hash") {
      both({"HGETALL", key}, &mine, &real);
      bool same = mine.is_array() && real.is_array() &&
                  mine.elements.size() == real.elements.size();
      for (size_t i = 0; same && i < mine.elements.size(); ++i) {
        const std::string& a = mine.elements[i].str;
        const std::string& b = real.elements[i].str;
        if (a == b) continue;
        // A value "ticket:expiry": the same ticket, expiries within 50 ms.
        const size_t ca = a.find(':'), cb = b.find(':');
        int64_t ea = 0, eb = 0;
        same = i % 2 == 1 && ca != std::string::npos && cb != std::string::npos &&
               a.substr(0, ca) == b.substr(0, cb) && absl::SimpleAtoi(a.substr(ca + 1), &ea) &&
               absl::SimpleAtoi(b.substr(cb + 1), &eb) && std::llabs(ea - eb) <= 50;
      }
      if (!same) {
        absl::StrAppend(&diff, "HGETALL ", key, ": ", mine.DebugString(), " vs ",
                        real.DebugString(), "\n");
      }
    }
  }
  return diff;
}

// The fair lock's scripts (lock/fair_scripts.h; not in AllScripts(), since
// the queue entries expire at server TIME + queue ttl) and the ExtendScript
// it shares with SimpleLock: a seeded random walk over one resource with
// five waiters and five tokens. Steps: FairAcquire with a waiter (enqueue,
// refresh a queued entry, or take the lock at the head; half the time the
// waiter is the current head, read from the fake), a try that never queues,
// FairRelease by the holder's or another token with or without leaving the
// queue, extend, a waiter's timeout (its entry rewritten to an expiry long
// past, keeping its ticket: the real server's clock cannot be advanced, so
// the entry is made to have timed out, and the next script must skip and
// drop it on both), a lease running out (DEL of the lock key), a plain
// SimpleLock holder, foreign data in the queue or the lock key, resets.
// After EVERY step the reply must agree and so must the keyspace
// (FairKeyspaceDiff: lock, fence, queue hash in order). Lock and queue TTLs
// are long and come from two buckets 2,000 s apart, growing by 100 ms a
// step, so nothing expires during the run and the "raise the queue's PTTL"
// comparison decides alike on both.
TEST(DifferentialTest, FairScriptsMatchARealServer) {
  FakeBesideReal pair;
  ASSERT_THAT(pair.Start(/*untouched=*/true), IsOk());
  FakeRedis& fake = pair.fake();
  ASSERT_THAT(pair.SetMarkers(), IsOk());
  std::string acquire, release;
  for (const NamedScript& s : FairScripts()) {
    const std::string name = s.name;
    if (name == "fair_acquire") acquire = s.script->sha1();
    if (name == "fair_release") release = s.script->sha1();
    ASSERT_THAT(pair.Both({"SCRIPT", "LOAD", s.script->source()}), IsOk());
  }
  ASSERT_FALSE(acquire.empty());
  ASSERT_FALSE(release.empty());
  const std::string extend = DlockSha("extend");
  ASSERT_THAT(pair.Both({"SCRIPT", "LOAD", DlockSource("extend")}), IsOk());
  std::mt19937_64 rng(EnvInt("DLOCK_DIFFERENTIAL_SEED", 1));
  auto below = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto pick = [&](std::vector<std::string> v) { return v[below(static_cast<int>(v.size()))]; };
  const std::string lock = "{f}lock", fence = "m:hwm", queue = "{f}lock:queue";
  const std::vector<std::string> waiters = {"i1:1", "i1:2", "i2:1", "i3:7", "i4:1"};
  const std::vector<std::string> tokens = {"tokA", "tokB", "tokC", "tokD", "tokE"};
  int64_t steps = 0;
  // A TTL from bucket 1,000 s or 3,000 s, 100 ms longer than the last.
  auto long_ttl = [&]() {
    ++steps;
    return absl::StrCat((below(2) ? 1000000 : 3000000) + 100 * steps);
  };
  // The fake's live head (lowest ticket whose expiry is ahead), or "".
  auto fake_head = [&]() {
    Reply all = fake.Execute({"HGETALL", queue});
    std::string head;
    int64_t best = 0;
    for (size_t i = 0; all.is_array() && i + 1 < all.elements.size(); i += 2) {
      const std::string& v = all.elements[i + 1].str;
      int64_t ticket = 0, expiry = 0;
      const size_t c = v.find(':');
      if (c == std::string::npos || !absl::SimpleAtoi(v.substr(0, c), &ticket) ||
          !absl::SimpleAtoi(v.substr(c + 1), &expiry) || expiry <= pair.start_micros() / 1000) {
        continue;
      }
      if (head.empty() || ticket < best) head = all.elements[i].str, best = ticket;
    }
    return head;
  };
  int head_grants = 0, queued = 0, refreshed = 0, timed_out = 0, released = 0, notified = 0;
  RecentSteps recent;
  for (int i = 0; i < EnvInt("DLOCK_DIFFERENTIAL_COMMANDS", 3000); ++i) {
    Argv argv;
    std::string head = fake_head();
    const Reply holder = fake.Execute({"GET", lock});
    const std::string holder_token =
        holder.is_string() && below(2) ? holder.str : pick(tokens);
    std::string waiter = pick(waiters);
    bool was_queued = false;
    const int kind = below(24);
    if (kind < 11) {
      // FairAcquire with a waiter id.
      if (!head.empty() && below(2)) waiter = head;
      was_queued = fake.Execute({"HEXISTS", queue, waiter}) == Reply::Integer(1);
      const auto& marker = DataSetMarkers()[below(10) == 0 ? below(3) : 0];
      argv = {"EVALSHA", acquire, "4", lock, marker.first, queue, "m:hwm", pick(tokens),
              long_ttl(), pick({"0", "0", "0", "60000"}), waiter, long_ttl(),
              pick({"dlock:waiter:", "w:"})};
    } else if (kind == 11) {
      argv = {"EVALSHA", acquire, "4", lock, "m:began-trusted", queue, "m:hwm",
              pick(tokens),
              long_ttl(), "0", "", long_ttl(), "dlock:waiter:"};
    } else if (kind < 16) {
      argv = {"EVALSHA", release, "2", lock, queue, holder_token,
              below(2) ? std::string() : (below(2) && !head.empty() ? head : waiter),
              pick({"dlock:waiter:", "w:"})};
    } else if (kind == 16) {
      argv = {"EVALSHA", extend, "1", lock, holder_token, long_ttl()};
    } else if (kind == 17) {
      // A waiter times out: its entry's expiry is long past (ticket kept);
      // a waiter not queued leaves a stray dead entry.
      if (!head.empty() && below(2)) waiter = head;
      Reply entry = fake.Execute({"HGET", queue, waiter});
      std::string ticket = absl::StrCat(1 + below(9));
      if (entry.is_string() && entry.str.find(':') != std::string::npos) {
        ticket = entry.str.substr(0, entry.str.find(':'));
      }
      argv = {"HSET", queue, waiter, absl::StrCat(ticket, ":", pick({"1000", "1700000000000"}))};
      ++timed_out;
    } else if (kind == 18) {
      argv = {"DEL", lock};  // the holder's lease ran out
    } else if (kind == 19) {
      argv = {"SET", lock, pick(tokens), "PX", long_ttl(), "NX"};  // a SimpleLock holder
    } else if (kind == 20) {
      // (The queue's HGETALL is in every step's keyspace check, with its
      // expiries compared within a tolerance.)
      argv = {pick({"HLEN", "TYPE", "PTTL", "EXISTS"}), pick({lock, queue, fence})};
    } else if (kind == 21) {
      argv = {"DEL", pick({queue, fence, lock})};
    } else if (kind == 22 && below(4) == 0) {
      argv = below(2) ? Argv{"HSET", queue, pick(waiters), pick({"garbage", "x:y", ""})}
                      : Argv{"HSET", lock, "f", "1"};  // foreign data, until a DEL
    } else {
      argv = {"GET", fence};
    }
    Reply mine;
    ASSERT_TRUE(RunAgreeing(pair, i, argv, recent, &mine));
    const std::string diff = FairKeyspaceDiff(fake, pair.server(), {lock, fence, queue});
    ASSERT_EQ(diff, "") << "after #" << i << " " << Render(argv) << " -> " << mine.DebugString()
                        << "\n  previous:\n    " << recent.Joined();
    if (argv[0] == "EVALSHA" && argv[1] == acquire && argv[10] != "") {
      if (mine.is_integer() && was_queued) ++head_grants;
      if (mine.is_array() && !mine.elements.empty() &&
          mine.elements[0] == Reply::String("queued")) {
        ++(was_queued ? refreshed : queued);
      }
    }
    if (argv[0] == "EVALSHA" && argv[1] == release && mine == Reply::Integer(1)) {
      ++released;
      if (!fake_head().empty()) ++notified;
    }
    recent.Add(i, argv, mine);
  }
  std::printf("fair differential: %d grants at the head, %d enqueued, %d refreshed, "
              "%d timeouts, %d releases (%d with a live head)\n",
              head_grants, queued, refreshed, timed_out, released, notified);
  // The walk met every path many times (a guard against a generator that
  // stopped producing them).
  EXPECT_GT(head_grants, 30);
  EXPECT_GT(queued, 100);
  EXPECT_GT(refreshed, 100);
  EXPECT_GT(timed_out, 50);
  EXPECT_GT(released, 50);
  EXPECT_GT(notified, 20);
}

// The error replies ErrorReplyStatus (lock_commands.h) classifies, as they
// come out of dlock's scripts run by EVALSHA: the failing call's code with
// Redis 7's " script: <sha>, on @user_script:<line>." suffix.
TEST(DifferentialTest, ErrorsInsideDlockScriptsMatchARealServer) {
  const std::vector<Argv> commands = {
      {"SCRIPT", "LOAD", DlockSource("acquire")},
      {"SCRIPT", "LOAD", DlockSource("reentrant_extend")},
      // A fence mark of the wrong type: WRONGTYPE from GET inside the script.
      {"HSET", "m:hwm", "f", "1"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      {"EXISTS", "{r}lock"},
      // A fence mark at int64 max.
      {"SET", "m:hwm", "9223372036854775807"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      // Not an integer.
      {"SET", "m:hwm", "abc"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      {"EXISTS", "{r}lock"},
      // The last exact fence: INCR then DECR (the mark is left as it was),
      // the lock key deleted again.
      {"SET", "m:hwm", "9007199254740991"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      {"GET", "m:hwm"},
      {"EXISTS", "{r}lock"},
      // A missing mark under a foreign marker: INCR's 1 and the lock key
      // are deleted again.
      {"DEL", "m:hwm"},
      {"SET", "m:began", "yesterday"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      {"EXISTS", "m:hwm", "{r}lock"},
      {"HSET", "m:began", "f", "1"},
      {"EVALSHA", DlockSha("acquire"), "3", "{r}lock", "m:began", "m:hwm", "tokA", "100000"},
      {"EXISTS", "m:hwm", "{r}lock"},
      {"DEL", "m:began"},
      // SET NX PX GET on another type (WRONGTYPE, caught: foreign data), on
      // a string with no TTL (foreign), on a holder's key (nil); a bad TTL
      // is SET's own error.
      {"SCRIPT", "LOAD", DlockSource("write_acquire")},
      {"SCRIPT", "LOAD", DlockSource("acquire_unfenced")},
      // A trusted marker: a mark of 41 is valid (below 2^50 a script checks
      // it against the marker; with none it would be raised to TIME, which
      // differs between the two servers).
      {"SET", "m:began", "0"},
      {"SET", "m:hwm", "41"},
      {"HSET", "{h}lock", "f", "1"},
      {"EVALSHA", DlockSha("acquire"), "3", "{h}lock", "m:began", "m:hwm", "tokA", "100000", "0"},
      {"EVALSHA", DlockSha("acquire_unfenced"), "1", "{h}lock", "tokA", "100000", "0"},
      {"EVALSHA", DlockSha("write_acquire"), "5", "{h}lock", "{h}lock:readers", "{h}lock:w",
       "m:began", "m:hwm", "tokA", "100000", "0", "0"},
      {"SET", "{s}lock", "v"},
      {"EVALSHA", DlockSha("acquire"), "3", "{s}lock", "m:began", "m:hwm", "tokA", "100000", "0"},
      {"EVALSHA", DlockSha("acquire_unfenced"), "1", "{s}lock", "tokA", "100000", "0"},
      {"SET", "{t}lock", "v", "PX", "3000000"},
      {"EVALSHA", DlockSha("acquire"), "3", "{t}lock", "m:began", "m:hwm", "tokA", "100000", "0"},
      {"EVALSHA", DlockSha("write_acquire"), "5", "{t}lock", "{t}lock:readers", "{t}lock:w",
       "m:began", "m:hwm", "tokA", "100000", "0", "2000000"},
      {"GET", "{t}lock:w"},
      {"EVALSHA", DlockSha("acquire"), "3", "{u}lock", "m:began", "m:hwm", "tokA", "-5", "0"},
      {"EVALSHA", DlockSha("acquire"), "3", "{u}lock", "m:began", "m:hwm", "tokA", "100000", "0"},
      {"EVALSHA", DlockSha("write_acquire"), "5", "{v}lock", "{v}lock:readers", "{v}lock:w",
       "m:began", "m:hwm", "tokA", "100000", "0", "0"},
      {"GET", "m:hwm"},
      // A window with a trusted marker: the fast path passes at once.
      {"SET", "m:began", "0"},
      {"EVALSHA", DlockSha("acquire"), "3", "{w}lock", "m:began", "m:hwm", "tokA", "100000",
       "30000"},
      // The reentrant extend only raises the TTL.
      {"HSET", "{r}lock", "ownerX", "1"},
      {"PEXPIRE", "{r}lock", "3000000"},
      {"EVALSHA", DlockSha("reentrant_extend"), "1", "{r}lock", "ownerX", "1000000"},
      {"EVALSHA", DlockSha("reentrant_extend"), "1", "{r}lock", "ownerX", "5000000"},
      {"EVALSHA", DlockSha("reentrant_extend"), "1", "{r}lock", "ownerX", "abc"},
      {"EVALSHA", DlockSha("reentrant_extend"), "1", "{r}lock", "ownerY", "5000000"},
  };
  CompareFixed(commands, /*deny_channels=*/false);
}

// The acquire scripts create a missing data-set marker from TIME: on the
// fake and on a real server the marker is the server's time in ms (within
// the clocks' skew), and the first fence is marker x 1000 + 1 on both.
TEST(DifferentialTest, DataSetMarkerCreatedOnFirstContactAgrees) {
  FakeBesideReal pair;
  ASSERT_THAT(pair.Start(/*untouched=*/true), IsOk());
  FakeRedis& fake = pair.fake();
  for (const NamedScript& s : AllScripts()) {
    const std::string name = s.name;
    if (name != "acquire" && name != "reentrant_acquire") continue;
    SCOPED_TRACE(name);
    Argv argv = {"EVAL", s.script->source(), absl::StrCat(s.num_keys), "{" + name + "}"};
    if (name == "reentrant_acquire") argv.push_back("{" + name + "}:acquire:1");
    argv.insert(argv.end(), {name + ":began", name + ":hwm", "tok", "1000000", "60000"});
    absl::StatusOr<FakeBesideReal::Replies> replies = pair.Run(argv);
    ASSERT_TRUE(replies.ok()) << replies.status();
    const Reply mine = replies->fake;
    absl::StatusOr<Reply> real = replies->real;
    const int64_t now = pair.now_micros();
    // Young: {'young', ms left, age}; the marker was just created.
    ASSERT_TRUE(Agree(argv, mine, *real)) << mine.DebugString() << " vs " << real->DebugString();
    ASSERT_EQ(mine.elements.size(), 3u) << mine.DebugString();
    EXPECT_EQ(mine.elements[2], Reply::Integer(0));
    absl::StatusOr<Reply> real_marker = pair.server().Command({"GET", name + ":began"});
    ASSERT_TRUE(real_marker.ok());
    int64_t a = 0, b = 0;
    ASSERT_TRUE(absl::SimpleAtoi(real_marker->str, &a)) << real_marker->DebugString();
    ASSERT_TRUE(absl::SimpleAtoi(fake.Execute({"GET", name + ":began"}).str, &b));
    EXPECT_LE(std::llabs(a - b), 50);
    EXPECT_LE(std::llabs(a - now / 1000), 1000);
    // With no window, the first fence is the server's TIME in us + 1 (the
    // mark is missing and the marker is not trusted): above marker x 1000,
    // within the test's run of it.
    argv.back() = "0";
    real = pair.server().Command(argv);
    ASSERT_TRUE(real.ok());
    const Reply granted = fake.Execute(argv);
    const Reply& real_fence = real->is_array() ? real->elements[1] : *real;
    const Reply& fake_fence = granted.is_array() ? granted.elements[1] : granted;
    ASSERT_TRUE(real_fence.is_integer()) << real->DebugString();
    ASSERT_TRUE(fake_fence.is_integer()) << granted.DebugString();
    EXPECT_GT(real_fence.integer, a * 1000) << real->DebugString();
    EXPECT_LE(real_fence.integer, a * 1000 + 60000000) << real->DebugString();
    EXPECT_GT(fake_fence.integer, b * 1000) << granted.DebugString();
    EXPECT_LE(fake_fence.integer, b * 1000 + 60000000) << granted.DebugString();
  }
}

}  // namespace
}  // namespace dlock
