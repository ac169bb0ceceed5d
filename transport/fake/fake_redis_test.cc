#include "dlock/transport/fake/fake_redis.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Reply S(std::string s) { return Reply::String(std::move(s)); }
Reply I(int64_t v) { return Reply::Integer(v); }
Reply E(std::string s) { return Reply::Error(std::move(s)); }
Reply A(std::vector<Reply> v) { return Reply::Array(std::move(v)); }
Reply OkReply() { return Reply::Status("OK"); }
Reply Nil() { return Reply::Nil(); }

const char kWrongType[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char kNotInt[] = "ERR value is not an integer or out of range";

class FakeRedisTest : public ::testing::Test {
 protected:
  Reply Run(std::vector<std::string> argv) { return server_.Execute(std::move(argv)); }
  // EVAL with the error suffix Redis adds for errors raised in scripts.
  static std::string ScriptErr(const std::string& msg, const std::string& body, int line = 1) {
    return msg + " script: " + Sha1Hex(body) + ", on @user_script:" + std::to_string(line) + ".";
  }

  ManualEventLoop loop_;
  FakeRedis server_{&loop_};
};

// ---- strings ---------------------------------------------------------------

TEST_F(FakeRedisTest, SetAndGetStoreBinarySafeValues) {
  const std::string key("k\0ey", 4), value("v\0\r\nal", 6);
  EXPECT_EQ(Run({"SET", key, value}), OkReply());
  EXPECT_EQ(Run({"get", key}), S(value));
  EXPECT_EQ(Run({"GET", "missing"}), Nil());
}

TEST_F(FakeRedisTest, SetNxAndXxFollowExistence) {
  EXPECT_EQ(Run({"SET", "k", "a", "XX"}), Nil());
  EXPECT_EQ(Run({"SET", "k", "a", "NX"}), OkReply());
  EXPECT_EQ(Run({"SET", "k", "b", "NX"}), Nil());
  EXPECT_EQ(Run({"SET", "k", "c", "xx"}), OkReply());
  EXPECT_EQ(Run({"GET", "k"}), S("c"));
  EXPECT_EQ(Run({"SETNX", "k", "d"}), I(0));
  EXPECT_EQ(Run({"SETNX", "k2", "d"}), I(1));
}

TEST_F(FakeRedisTest, SetGetReturnsOldValueAndRespectsNx) {
  EXPECT_EQ(Run({"SET", "k", "a", "GET"}), Nil());
  EXPECT_EQ(Run({"SET", "k", "b", "GET"}), S("a"));
  EXPECT_EQ(Run({"SET", "k", "c", "GET", "NX"}), S("b"));
  EXPECT_EQ(Run({"GET", "k"}), S("b"));
  Run({"HSET", "h", "f", "v"});
  EXPECT_EQ(Run({"SET", "h", "x", "GET"}), E(kWrongType));
}

TEST_F(FakeRedisTest, SetRejectsInvalidOptionCombinationsLikeRedis) {
  EXPECT_EQ(Run({"SET", "k", "v", "NX", "XX"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "10", "EX", "10"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"SET", "k", "v", "KEEPTTL", "PX", "10"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"SET", "k", "v", "PX"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"SET", "k", "v", "foo"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"SET", "k", "v", "NX", "NX"}), OkReply());
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "100", "PX", "100"}), OkReply());
}

TEST_F(FakeRedisTest, SetRejectsBadExpireTimes) {
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "0"}), E("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "-1"}), E("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "abc"}), E(kNotInt));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "99999999999999999999"}), E(kNotInt));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "9223372036854775807"}),
            E("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(Run({"SET", "k", "v", "EX", "922337203685477580"}),
            E("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", " 1"}), E(kNotInt));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "+1"}), E(kNotInt));
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "01"}), E(kNotInt));
  EXPECT_EQ(Run({"EXISTS", "k"}), I(0));
}

TEST_F(FakeRedisTest, KeysExpireOnTheLoopClockOneMillisecondAfterTheirDeadline) {
  EXPECT_EQ(Run({"SET", "k", "v", "PX", "100"}), OkReply());
  EXPECT_EQ(Run({"PTTL", "k"}), I(100));
  loop_.AdvanceTime(absl::Milliseconds(60));
  EXPECT_EQ(Run({"PTTL", "k"}), I(40));
  EXPECT_EQ(Run({"TTL", "k"}), I(0));
  loop_.AdvanceTime(absl::Milliseconds(40));
  EXPECT_EQ(Run({"GET", "k"}), S("v"));  // alive at the deadline, like Redis
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_EQ(Run({"GET", "k"}), Nil());
  EXPECT_EQ(Run({"PTTL", "k"}), I(-2));
  EXPECT_EQ(Run({"DBSIZE"}), I(0));
}

TEST_F(FakeRedisTest, SetExUsesSecondsAndTtlRounds) {
  Run({"SET", "k", "v", "EX", "10"});
  EXPECT_EQ(Run({"PTTL", "k"}), I(10000));
  loop_.AdvanceTime(absl::Milliseconds(1500));
  EXPECT_EQ(Run({"TTL", "k"}), I(9));  // (8500 + 500) / 1000
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_EQ(Run({"TTL", "k"}), I(8));
}

TEST_F(FakeRedisTest, SetDropsTtlUnlessKeepTtl) {
  Run({"SET", "k", "v", "PX", "1000"});
  Run({"SET", "k", "w", "KEEPTTL"});
  EXPECT_EQ(Run({"PTTL", "k"}), I(1000));
  Run({"SET", "k", "x"});
  EXPECT_EQ(Run({"PTTL", "k"}), I(-1));
}

TEST_F(FakeRedisTest, SetExatAndPxatUseTheServerWallClock) {
  const int64_t now = server_.NowMs();
  Run({"SET", "k", "v", "PXAT", std::to_string(now + 500)});
  EXPECT_EQ(Run({"PTTL", "k"}), I(500));
  EXPECT_EQ(Run({"SET", "k", "v", "EXAT", "1"}), OkReply());
  EXPECT_EQ(Run({"GET", "k"}), Nil());
}

TEST_F(FakeRedisTest, GetDelDelExistsAndType) {
  Run({"SET", "a", "1"});
  Run({"HSET", "h", "f", "v"});
  EXPECT_EQ(Run({"EXISTS", "a", "a", "h", "zz"}), I(3));
  EXPECT_EQ(Run({"TYPE", "a"}), Reply::Status("string"));
  EXPECT_EQ(Run({"TYPE", "h"}), Reply::Status("hash"));
  EXPECT_EQ(Run({"TYPE", "zz"}), Reply::Status("none"));
  EXPECT_EQ(Run({"GETDEL", "h"}), E(kWrongType));
  EXPECT_EQ(Run({"GETDEL", "a"}), S("1"));
  EXPECT_EQ(Run({"GETDEL", "a"}), Nil());
  EXPECT_EQ(Run({"DEL", "h", "h", "zz"}), I(1));
  EXPECT_EQ(Run({"DBSIZE"}), I(0));
}

TEST_F(FakeRedisTest, IncrFamilyParsesStrictlyAndDetectsOverflow) {
  EXPECT_EQ(Run({"INCR", "n"}), I(1));
  EXPECT_EQ(Run({"INCRBY", "n", "41"}), I(42));
  EXPECT_EQ(Run({"DECR", "n"}), I(41));
  EXPECT_EQ(Run({"DECRBY", "n", "-9"}), I(50));
  EXPECT_EQ(Run({"INCRBY", "n", "abc"}), E(kNotInt));
  EXPECT_EQ(Run({"DECRBY", "n", "-9223372036854775808"}), E("ERR decrement would overflow"));
  Run({"SET", "n", "9223372036854775807"});
  EXPECT_EQ(Run({"INCR", "n"}), E("ERR increment or decrement would overflow"));
  Run({"SET", "s", "12 "});
  EXPECT_EQ(Run({"INCR", "s"}), E(kNotInt));
  Run({"HSET", "h", "f", "v"});
  EXPECT_EQ(Run({"DECR", "h"}), E(kWrongType));
}

TEST_F(FakeRedisTest, IncrKeepsTheKeysTtl) {
  Run({"SET", "n", "1", "PX", "1000"});
  Run({"INCR", "n"});
  EXPECT_EQ(Run({"PTTL", "n"}), I(1000));
}

// ---- expiry ----------------------------------------------------------------

TEST_F(FakeRedisTest, PExpireSetsReplacesAndDeletesOnNonPositive) {
  EXPECT_EQ(Run({"PEXPIRE", "k", "100"}), I(0));
  Run({"SET", "k", "v"});
  EXPECT_EQ(Run({"PEXPIRE", "k", "100"}), I(1));
  EXPECT_EQ(Run({"PTTL", "k"}), I(100));
  EXPECT_EQ(Run({"EXPIRE", "k", "5"}), I(1));
  EXPECT_EQ(Run({"PTTL", "k"}), I(5000));
  EXPECT_EQ(Run({"PERSIST", "k"}), I(1));
  EXPECT_EQ(Run({"PERSIST", "k"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "-1"}), I(1));
  EXPECT_EQ(Run({"EXISTS", "k"}), I(0));
}

TEST_F(FakeRedisTest, PExpireOptionsFollowRedisRules) {
  Run({"SET", "k", "v"});
  EXPECT_EQ(Run({"PEXPIRE", "k", "100", "XX"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "100", "GT"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "100", "NX"}), I(1));
  EXPECT_EQ(Run({"PEXPIRE", "k", "200", "NX"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "50", "GT"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "200", "GT"}), I(1));
  EXPECT_EQ(Run({"PEXPIRE", "k", "300", "LT"}), I(0));
  EXPECT_EQ(Run({"PEXPIRE", "k", "150", "lt"}), I(1));
  EXPECT_EQ(Run({"PTTL", "k"}), I(150));
  EXPECT_EQ(Run({"PEXPIRE", "k", "10", "foo"}), E("ERR Unsupported option foo"));
  EXPECT_EQ(Run({"PEXPIRE", "k", "abc", "foo"}), E("ERR Unsupported option foo"));
  EXPECT_EQ(Run({"PEXPIRE", "k", "10", "NX", "XX"}),
            E("ERR NX and XX, GT or LT options at the same time are not compatible"));
  EXPECT_EQ(Run({"PEXPIRE", "k", "10", "GT", "LT"}),
            E("ERR GT and LT options at the same time are not compatible"));
  EXPECT_EQ(Run({"PEXPIRE", "k", "abc"}), E(kNotInt));
  EXPECT_EQ(Run({"PEXPIRE", "k", "9223372036854775807"}),
            E("ERR invalid expire time in 'pexpire' command"));
  EXPECT_EQ(Run({"EXPIRE", "k", "9223372036854775807"}),
            E("ERR invalid expire time in 'expire' command"));
}

// ---- hashes ----------------------------------------------------------------

TEST_F(FakeRedisTest, HashCommandsKeepInsertionOrder) {
  EXPECT_EQ(Run({"HSET", "h", "b", "1", "a", "2"}), I(2));
  EXPECT_EQ(Run({"HSET", "h", "b", "3", "c", "4"}), I(1));
  EXPECT_EQ(Run({"HGETALL", "h"}), A({S("b"), S("3"), S("a"), S("2"), S("c"), S("4")}));
  EXPECT_EQ(Run({"HGET", "h", "a"}), S("2"));
  EXPECT_EQ(Run({"HGET", "h", "zz"}), Nil());
  EXPECT_EQ(Run({"HEXISTS", "h", "c"}), I(1));
  EXPECT_EQ(Run({"HLEN", "h"}), I(3));
  EXPECT_EQ(Run({"HDEL", "h", "a", "a", "zz"}), I(1));
  EXPECT_EQ(Run({"HGETALL", "missing"}), A({}));
  EXPECT_EQ(Run({"HDEL", "h", "b", "c"}), I(2));
  EXPECT_EQ(Run({"EXISTS", "h"}), I(0));  // the last field took the key
}

TEST_F(FakeRedisTest, HIncrByAndHashErrors) {
  EXPECT_EQ(Run({"HINCRBY", "h", "n", "5"}), I(5));
  EXPECT_EQ(Run({"HINCRBY", "h", "n", "-7"}), I(-2));
  EXPECT_EQ(Run({"HINCRBY", "h", "n", "x"}), E(kNotInt));
  Run({"HSET", "h", "s", "abc"});
  EXPECT_EQ(Run({"HINCRBY", "h", "s", "1"}), E("ERR hash value is not an integer"));
  Run({"HSET", "h", "big", "9223372036854775807"});
  EXPECT_EQ(Run({"HINCRBY", "h", "big", "1"}), E("ERR increment or decrement would overflow"));
  EXPECT_EQ(Run({"HSET", "h", "f"}), E("ERR wrong number of arguments for 'hset' command"));
  Run({"SET", "str", "v"});
  for (auto argv : std::vector<std::vector<std::string>>{{"HSET", "str", "f", "v"},
                                                         {"HGET", "str", "f"},
                                                         {"HDEL", "str", "f"},
                                                         {"HEXISTS", "str", "f"},
                                                         {"HINCRBY", "str", "f", "1"},
                                                         {"HLEN", "str"},
                                                         {"HGETALL", "str"}}) {
    EXPECT_EQ(Run(argv), E(kWrongType)) << argv[0];
  }
}

// ---- generic errors --------------------------------------------------------

TEST_F(FakeRedisTest, ArityAndUnknownCommandErrorsAreWordedLikeRedis) {
  EXPECT_EQ(Run({"GET"}), E("ERR wrong number of arguments for 'get' command"));
  EXPECT_EQ(Run({"GET", "a", "b"}), E("ERR wrong number of arguments for 'get' command"));
  EXPECT_EQ(Run({"PING", "a", "b"}), E("ERR wrong number of arguments for 'ping' command"));
  EXPECT_EQ(Run({"foo", "a", "b"}),
            E("ERR unknown command 'foo', with args beginning with: 'a' 'b' "));
  EXPECT_EQ(Run({"foo"}), E("ERR unknown command 'foo', with args beginning with: "));
  EXPECT_EQ(Run({"foo", std::string(200, 'x'), "b"}),
            E("ERR unknown command 'foo', with args beginning with: '" + std::string(128, 'x') +
              "' "));
  EXPECT_EQ(Run({"foo", "a\r\nb"}),
            E("ERR unknown command 'foo', with args beginning with: 'a  b' "));
  EXPECT_EQ(Run({"SCRIPT"}), E("ERR wrong number of arguments for 'script' command"));
  EXPECT_EQ(Run({"SCRIPT", "LOAD"}),
            E("ERR wrong number of arguments for 'script|load' command"));
  EXPECT_EQ(Run({"SCRIPT", "foo"}), E("ERR unknown subcommand 'foo'. Try SCRIPT HELP."));
}

TEST_F(FakeRedisTest, ServerCommands) {
  EXPECT_EQ(Run({"PING"}), Reply::Status("PONG"));
  EXPECT_EQ(Run({"PING", "hi"}), S("hi"));
  EXPECT_EQ(Run({"ECHO", "x"}), S("x"));
  Run({"SET", "a", "1"});
  Run({"SET", "b", "1"});
  EXPECT_EQ(Run({"DBSIZE"}), I(2));
  EXPECT_EQ(Run({"FLUSHALL", "foo"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"FLUSHALL", "SYNC"}), OkReply());
  EXPECT_EQ(Run({"DBSIZE"}), I(0));
  Reply time = Run({"TIME"});
  ASSERT_TRUE(time.is_array());
  ASSERT_EQ(time.elements.size(), 2u);
  EXPECT_EQ(time.elements[0], S(std::to_string(server_.NowMs() / 1000)));
  Reply info = Run({"INFO", "server"});
  ASSERT_TRUE(info.is_string());
  EXPECT_THAT(info.str, ::testing::HasSubstr("run_id:" + server_.run_id() + "\r\n"));
  EXPECT_THAT(info.str, ::testing::HasSubstr("redis_version:7.0.15\r\n"));
  EXPECT_EQ(Run({"INFO", "foo"}), S(""));
}

// ---- scripting ---------------------------------------------------------------

TEST_F(FakeRedisTest, EvalSeesKeysAndArgvAndCallsCommands) {
  const std::string body =
      "redis.call('set', KEYS[1], ARGV[1]); return {KEYS[1], ARGV[1], ARGV[2], "
      "redis.call('get', KEYS[1])}";
  EXPECT_EQ(Run({"EVAL", body, "1", "k", "v", "w"}), A({S("k"), S("v"), S("w"), S("v")}));
  EXPECT_EQ(Run({"GET", "k"}), S("v"));
}

TEST_F(FakeRedisTest, LuaToRedisConversionRules) {
  EXPECT_EQ(Run({"EVAL", "return 3.99", "0"}), I(3));
  EXPECT_EQ(Run({"EVAL", "return -3.99", "0"}), I(-3));
  EXPECT_EQ(Run({"EVAL", "return 1/0", "0"}), I(INT64_MIN));
  EXPECT_EQ(Run({"EVAL", "return true", "0"}), I(1));
  EXPECT_EQ(Run({"EVAL", "return false", "0"}), Nil());
  EXPECT_EQ(Run({"EVAL", "return nil", "0"}), Nil());
  EXPECT_EQ(Run({"EVAL", "return {1, 2, nil, 3}", "0"}), A({I(1), I(2)}));
  EXPECT_EQ(Run({"EVAL", "return {true, false, 'a'}", "0"}), A({I(1), Nil(), S("a")}));
  EXPECT_EQ(Run({"EVAL", "return {ok='FINE'}", "0"}), Reply::Status("FINE"));
  EXPECT_EQ(Run({"EVAL", "return {err='x'}", "0"}), E("x"));
  EXPECT_EQ(Run({"EVAL", "return redis.status_reply('FINE')", "0"}), Reply::Status("FINE"));
  EXPECT_EQ(Run({"EVAL", "return redis.error_reply('My Error')", "0"}), E("My Error"));
  EXPECT_EQ(Run({"EVAL", "return redis.error_reply('')", "0"}), E("ERR "));
  EXPECT_EQ(Run({"EVAL", "return redis.error_reply('-X')", "0"}), E("ERR X"));
  EXPECT_EQ(Run({"EVAL", "return {double=1.5}", "0"}), S("1.5"));
  EXPECT_EQ(Run({"EVAL", "return 'a\\0b'", "0"}), S(std::string("a\0b", 3)));
}

TEST_F(FakeRedisTest, RedisToLuaConversionRules) {
  Run({"SET", "s", "v"});
  Run({"HSET", "h", "f", "1"});
  // nil bulk -> false; integer -> number; status -> {ok=...}; error -> {err=...}
  EXPECT_EQ(Run({"EVAL", "return redis.call('get', 'missing') == false", "0"}), I(1));
  EXPECT_EQ(Run({"EVAL", "return type(redis.call('incr', 'n'))", "0"}), S("number"));
  EXPECT_EQ(Run({"EVAL", "return redis.call('set', 'x', 'y').ok", "0"}), S("OK"));
  EXPECT_EQ(Run({"EVAL", "return redis.pcall('get', 'h').err", "0"}), S(kWrongType));
  EXPECT_EQ(Run({"EVAL", "return redis.pcall('get', 'h')", "0"}), E(kWrongType));
  EXPECT_EQ(Run({"EVAL", "return redis.call('hgetall', 'h')", "0"}), A({S("f"), S("1")}));
  // Lua numbers as command arguments use %.17g.
  EXPECT_EQ(Run({"EVAL", "redis.call('set', 'f', 0.1); return redis.call('get', 'f')", "0"}),
            S("0.10000000000000001"));
}

TEST_F(FakeRedisTest, ScriptErrorsCarryTheScriptShaAndLine) {
  Run({"HSET", "h", "f", "v"});
  std::string body = "return redis.call('get','h')";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr(kWrongType, body)));
  body = "error('x')";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("ERR user_script:1: x", body)));
  body = "error({err='x'})";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("x", body)));
  body = "error(nil)";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("ERR nil", body)));
  body = "\n\nreturn nil + 1";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR user_script:3: attempt to perform arithmetic on a nil value", body,
                        3)));
  body = "return redis.call('foo')";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("ERR Unknown Redis command called from script",
                                                  body)));
  body = "return redis.call('set','a')";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR Wrong number of args calling Redis command from script", body)));
  body = "return redis.call('eval','return 1', 0)";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR This Redis command is not allowed from script", body)));
  body = "return redis.call()";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR Please specify at least one argument for this redis lib call", body)));
  body = "return redis.call({})";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR Lua redis lib command arguments must be strings or integers", body)));
}

TEST_F(FakeRedisTest, PcallCatchesRedisErrorsAsStrings) {
  Run({"HSET", "h", "f", "v"});
  EXPECT_EQ(Run({"EVAL", "return {pcall(redis.call, 'get', 'h')}", "0"}),
            A({Nil(), S(kWrongType)}));
  EXPECT_EQ(Run({"EVAL", "return {pcall(error, 'boom', 0)}", "0"}), A({Nil(), S("boom")}));
}

TEST_F(FakeRedisTest, ScriptsCannotCreateOrChangeGlobals) {
  std::string body = "x = 1";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR user_script:1: Attempt to modify a readonly table", body)));
  body = "return y";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR user_script:1: Script attempted to access nonexistent global "
                        "variable 'y'",
                        body)));
  body = "string.x = 1";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR user_script:1: Attempt to modify a readonly table", body)));
  body = "rawset(_G, 'x', 1)";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR Attempt to modify a readonly table", body)));
  body = "return print";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR user_script:1: Script attempted to access nonexistent global "
                        "variable 'print'",
                        body)));
  // Locals, KEYS/ARGV tables and library functions still work.
  EXPECT_EQ(Run({"EVAL", "local t = {} t.x = 1 KEYS[1] = 'z' return {t.x, KEYS[1], "
                         "string.upper('a'), ('b'):upper(), tostring(12)}",
                 "1", "k"}),
            A({I(1), S("z"), S("A"), S("B"), S("12")}));
}

TEST_F(FakeRedisTest, CompileErrorsAndShebangs) {
  EXPECT_EQ(Run({"EVAL", "foo(", "0"}),
            E("ERR Error compiling script (new function): user_script:1: unexpected symbol "
              "near '<eof>'"));
  EXPECT_EQ(Run({"EVAL", "#!foo", "0"}), E("ERR Invalid script shebang"));
  EXPECT_EQ(Run({"EVAL", "#!lua foo=bar\nreturn 1", "0"}),
            E("ERR Unknown lua shebang option: foo=bar"));
  EXPECT_EQ(Run({"EVAL", "#!lua flags=zz\nreturn 1", "0"}),
            E("ERR Unexpected flag in script shebang: zz"));
  EXPECT_EQ(Run({"EVAL", "#!lua\nreturn 1", "0"}), I(1));
  const std::string ro = "#!lua flags=no-writes\nreturn redis.call('set','x','y')";
  EXPECT_EQ(Run({"EVAL", ro, "0"}),
            E(ScriptErr("ERR Write commands are not allowed from read-only scripts.", ro, 2)));
}

TEST_F(FakeRedisTest, EvalArgumentErrors) {
  EXPECT_EQ(Run({"EVAL", "return 1", "-1"}), E("ERR Number of keys can't be negative"));
  EXPECT_EQ(Run({"EVAL", "return 1", "2", "a"}),
            E("ERR Number of keys can't be greater than number of args"));
  EXPECT_EQ(Run({"EVAL", "return 1", "abc"}), E(kNotInt));
  EXPECT_EQ(Run({"EVAL", "return 1"}), E("ERR wrong number of arguments for 'eval' command"));
  EXPECT_EQ(Run({"EVALSHA", "abc", "abc"}), E("NOSCRIPT No matching script. Please use EVAL."));
}

TEST_F(FakeRedisTest, ScriptCacheLoadExistsEvalShaAndFlush) {
  const std::string sha = Sha1Hex("return 1");
  EXPECT_EQ(Run({"EVALSHA", sha, "0"}), E("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_EQ(Run({"SCRIPT", "LOAD", "return 1"}), S(sha));
  EXPECT_EQ(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  std::string upper = sha;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_EQ(Run({"SCRIPT", "EXISTS", upper, sha, "x"}), A({I(1), I(1), I(0)}));
  EXPECT_EQ(Run({"EVALSHA", upper, "0"}), I(1));
  EXPECT_EQ(Run({"SCRIPT", "FLUSH", "foo"}), E("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
  EXPECT_EQ(Run({"SCRIPT", "FLUSH"}), OkReply());
  EXPECT_EQ(Run({"EVALSHA", sha, "0"}), E("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_EQ(Run({"EVAL", "return 1", "0"}), I(1));  // EVAL caches it again
  EXPECT_EQ(Run({"EVALSHA", sha, "0"}), I(1));
}

TEST_F(FakeRedisTest, Sha1HexAndRandomMatchRedis) {
  EXPECT_EQ(Run({"EVAL", "return redis.sha1hex('')", "0"}),
            S("da39a3ee5e6b4b0d3255bfef95601890afd80709"));
  // redis-server 7.0.15 fresh: math.random() -> 0.39646477363839 then
  // 0.84048536971234 (rand48 with Redis's initial state).
  EXPECT_EQ(Run({"EVAL", "return tostring(math.random())", "0"}), S("0.39646477363839"));
  EXPECT_EQ(Run({"EVAL", "return tostring(math.random())", "0"}), S("0.84048536971234"));
}

TEST_F(FakeRedisTest, SelfReferencingTableEndsWithStackLimitErrorNotACrash) {
  Reply r = Run({"EVAL", "local t = {} t[1] = t return t", "0"});
  int depth = 0;
  const Reply* p = &r;
  while (p->is_array() && p->elements.size() == 1) {
    p = &p->elements[0];
    ++depth;
  }
  EXPECT_EQ(depth, 101);
  EXPECT_EQ(*p, E("ERR reached lua stack limit"));
}

TEST_F(FakeRedisTest, RedisLibraryHelpers) {
  EXPECT_EQ(Run({"EVAL", "redis.log(redis.LOG_WARNING, 'x') return redis.REDIS_VERSION", "0"}),
            S("7.0.15"));
  std::string body = "redis.log(99, 'x')";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("ERR Invalid debug level.", body)));
  body = "return redis.setresp(3)";
  EXPECT_EQ(Run({"EVAL", body, "0"}),
            E(ScriptErr("ERR FakeRedis supports only RESP2 in scripts", body)));
  EXPECT_EQ(Run({"EVAL", "redis.setresp(2) return redis.replicate_commands()", "0"}), I(1));
  body = "return redis.sha1hex()";
  EXPECT_EQ(Run({"EVAL", body, "0"}), E(ScriptErr("ERR wrong number of arguments", body)));
  EXPECT_EQ(Run({"EVAL", "return redis.status_reply(5)", "0"}),
            E("ERR wrong number or type of arguments"));
}

TEST_F(FakeRedisTest, RunawayScriptIsAbortedInsteadOfHanging) {
  FakeRedis::Options options;
  options.max_script_instructions = 1000000;
  FakeRedis server(&loop_, options);
  Reply r = server.Execute({"EVAL", "while true do end", "0"});
  ASSERT_TRUE(r.is_error());
  EXPECT_THAT(r.str, ::testing::HasSubstr("max_script_instructions"));
  r = server.Execute({"EVAL", "while true do pcall(function() while true do end end) end", "0"});
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(server.Execute({"EVAL", "return 7", "0"}), I(7));
}

// ---- pub/sub -----------------------------------------------------------------

TEST_F(FakeRedisTest, PublishReachesSubscribedSessions) {
  auto a = server_.NewSession();
  auto b = server_.NewSession();
  EXPECT_THAT(a->Command({"SUBSCRIBE", "c1", "c2"}),
              ElementsAre(A({S("subscribe"), S("c1"), I(1)}), A({S("subscribe"), S("c2"), I(2)})));
  b->Command({"SUBSCRIBE", "c1"});
  EXPECT_EQ(Run({"PUBLISH", "c1", "m"}), I(2));
  EXPECT_EQ(Run({"EVAL", "return redis.call('publish', 'c2', 'n')", "0"}), I(1));
  EXPECT_THAT(a->TakeMessages(), ElementsAre(A({S("message"), S("c1"), S("m")}),
                                             A({S("message"), S("c2"), S("n")})));
  EXPECT_THAT(b->TakeMessages(), ElementsAre(A({S("message"), S("c1"), S("m")})));
  // Subscribed: only (UN)SUBSCRIBE and PING.
  EXPECT_THAT(a->Command({"GET", "k"}),
              ElementsAre(E("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
                            "PING / QUIT / RESET are allowed in this context")));
  EXPECT_THAT(a->Command({"PING"}), ElementsAre(A({S("pong"), S("")})));
  EXPECT_THAT(a->Command({"UNSUBSCRIBE"}), ElementsAre(A({S("unsubscribe"), S("c1"), I(1)}),
                                                       A({S("unsubscribe"), S("c2"), I(0)})));
  EXPECT_THAT(a->Command({"UNSUBSCRIBE"}), ElementsAre(A({S("unsubscribe"), Nil(), I(0)})));
  b.reset();  // a destroyed session unsubscribes
  EXPECT_EQ(Run({"PUBLISH", "c1", "m"}), I(0));
  EXPECT_EQ(Run({"SUBSCRIBE", "c1"}).type, Reply::Type::kError);
}

// ---- faults and inspection -----------------------------------------------------

TEST_F(FakeRedisTest, RestartLosesDataScriptsAndSubscriptionsAndChangesRunId) {
  Run({"SET", "k", "v"});
  Run({"SCRIPT", "LOAD", "return 1"});
  auto session = server_.NewSession();
  session->Command({"SUBSCRIBE", "c"});
  int restarts_seen = 0;
  session->SetRestartHandler([&] { ++restarts_seen; });
  const std::string run_id = server_.run_id();
  server_.Restart();
  EXPECT_NE(server_.run_id(), run_id);
  EXPECT_EQ(server_.run_id().size(), 40u);
  EXPECT_EQ(restarts_seen, 1);
  EXPECT_EQ(server_.restart_count(), 1);
  EXPECT_EQ(Run({"DBSIZE"}), I(0));
  EXPECT_THAT(server_.CachedScripts(), IsEmpty());
  EXPECT_EQ(Run({"PUBLISH", "c", "m"}), I(0));
  EXPECT_EQ(session->subscription_count(), 0u);
}

TEST_F(FakeRedisTest, RestartStartsMathRandomOverLikeAFreshServer) {
  const std::vector<std::string> random = {"EVAL", "return tostring(math.random())", "0"};
  EXPECT_EQ(Run(random), S("0.39646477363839"));  // a fresh redis-server's first
  server_.Restart();
  EXPECT_EQ(Run(random), S("0.39646477363839"));
  EXPECT_EQ(Run(random), S("0.84048536971234"));
}

TEST(FakeRedisSessionTest, SessionOutlivingItsServerIsDetached) {
  ManualEventLoop loop;
  auto server = std::make_unique<FakeRedis>(&loop);
  std::unique_ptr<FakeRedis::Session> session = server->NewSession();
  session->Command({"SUBSCRIBE", "c"});
  server.reset();
  EXPECT_EQ(session->Command({"PING"}),
            std::vector<Reply>{E("ERR FakeRedis: the server was destroyed")});
  session->SubscribeDirect("d");  // no server: nothing happens
  EXPECT_EQ(session->subscription_count(), 1u);
  session.reset();  // does not touch the destroyed server
}

TEST_F(FakeRedisTest, JumpClockForwardExpiresAndBackwardExtends) {
  Run({"SET", "a", "v", "PX", "1000"});
  server_.JumpClock(absl::Milliseconds(-500));
  EXPECT_EQ(Run({"PTTL", "a"}), I(1500));
  server_.JumpClock(absl::Seconds(2));
  EXPECT_EQ(Run({"EXISTS", "a"}), I(0));
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin());  // the loop's clock did not move
}

TEST_F(FakeRedisTest, EvictAndInspection) {
  Run({"SET", "a", "1", "PX", "100"});
  Run({"HSET", "h", "f", "v"});
  EXPECT_TRUE(server_.Exists("a"));
  EXPECT_EQ(server_.GetString("a"), "1");
  EXPECT_EQ(server_.GetString("h"), std::nullopt);
  ASSERT_TRUE(server_.GetHash("h").has_value());
  EXPECT_EQ(server_.GetHash("h")->size(), 1u);
  EXPECT_EQ(server_.PTtl("a"), 100);
  EXPECT_EQ(server_.PTtl("h"), -1);
  EXPECT_EQ(server_.PTtl("zz"), -2);
  EXPECT_THAT(server_.Keys(), ElementsAre("a", "h"));
  EXPECT_TRUE(server_.Evict("a"));
  EXPECT_FALSE(server_.Evict("a"));
  EXPECT_EQ(server_.DbSize(), 1u);
}

TEST_F(FakeRedisTest, LogIsBounded) {
  FakeRedis::Options options;
  options.max_log_entries = 10;
  FakeRedis server(&loop_, options);
  for (int i = 0; i < 25; ++i) server.Execute({"SET", "k", std::to_string(i)});
  EXPECT_LE(server.log().size(), 10u);
  EXPECT_EQ(server.log().back().argv[2], "24");
  options.max_log_entries = 0;
  FakeRedis silent(&loop_, options);
  silent.Execute({"PING"});
  EXPECT_THAT(silent.log(), IsEmpty());
}

TEST_F(FakeRedisTest, LogRecordsClientAndScriptCommands) {
  Run({"SET", "a", "1"});
  Run({"EVAL", "redis.call('pexpire', KEYS[1], 100) return 1", "1", "a"});
  ASSERT_EQ(server_.log().size(), 3u);
  EXPECT_EQ(server_.log()[0].argv[0], "SET");
  EXPECT_FALSE(server_.log()[1].from_script);
  EXPECT_TRUE(server_.log()[2].from_script);
  EXPECT_EQ(server_.log()[2].argv, (std::vector<std::string>{"pexpire", "a", "100"}));
  EXPECT_EQ(server_.CountInLog("PEXPIRE"), 1);
  server_.ClearLog();
  EXPECT_THAT(server_.log(), IsEmpty());
}

}  // namespace
}  // namespace dlock
