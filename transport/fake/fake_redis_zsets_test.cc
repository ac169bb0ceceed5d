// Sorted sets in FakeRedis: the replies redis-server 7.0.15 gives (each
// expectation here was checked against it; the differential test compares
// random sequences).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

Reply S(std::string s) { return Reply::String(std::move(s)); }
Reply I(int64_t v) { return Reply::Integer(v); }
Reply E(std::string s) { return Reply::Error(std::move(s)); }
Reply A(std::vector<Reply> v) { return Reply::Array(std::move(v)); }
Reply Nil() { return Reply::Nil(); }

const char kWrongType[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char kNotFloat[] = "ERR value is not a valid float";
const char kRangeNotFloat[] = "ERR min or max is not a float";

class FakeRedisZSetTest : public ::testing::Test {
 protected:
  Reply Run(std::vector<std::string> argv) { return server_.Execute(std::move(argv)); }

  ManualEventLoop loop_;
  FakeRedis server_{&loop_};
};

TEST_F(FakeRedisZSetTest, ZAddOrdersByScoreThenMemberBytes) {
  EXPECT_EQ(Run({"ZADD", "z", "2", "b", "1", "c", "1", "a", "2", "B"}), I(4));
  EXPECT_EQ(Run({"ZRANGE", "z", "0", "-1"}), A({S("a"), S("c"), S("B"), S("b")}));
  EXPECT_EQ(Run({"ZCARD", "z"}), I(4));
  EXPECT_EQ(Run({"ZRANK", "z", "B"}), I(2));
  EXPECT_EQ(Run({"ZRANK", "z", "x"}), Nil());
  EXPECT_EQ(Run({"TYPE", "z"}), Reply::Status("zset"));
}

TEST_F(FakeRedisZSetTest, ZAddOptions) {
  EXPECT_EQ(Run({"ZADD", "z", "XX", "1", "a"}), I(0));
  EXPECT_EQ(Run({"EXISTS", "z"}), I(0));
  EXPECT_EQ(Run({"ZADD", "z", "NX", "5", "a"}), I(1));
  EXPECT_EQ(Run({"ZADD", "z", "NX", "6", "a"}), I(0));
  EXPECT_EQ(Run({"ZADD", "z", "GT", "CH", "4", "a"}), I(0));
  EXPECT_EQ(Run({"ZADD", "z", "GT", "CH", "7", "a", "1", "b"}), I(2));
  EXPECT_EQ(Run({"ZADD", "z", "LT", "8", "a"}), I(0));
  EXPECT_EQ(Run({"ZSCORE", "z", "a"}), S("7"));
  EXPECT_EQ(Run({"ZADD", "z", "XX", "CH", "2", "a", "3", "c"}), I(1));
  EXPECT_EQ(Run({"ZSCORE", "z", "c"}), Nil());
  EXPECT_EQ(Run({"ZADD", "z", "INCR", "1.5", "a"}), S("3.5"));
  EXPECT_EQ(Run({"ZADD", "z", "INCR", "GT", "-1", "a"}), Nil());
  EXPECT_EQ(Run({"ZADD", "z", "NX", "XX", "1", "a"}),
            E("ERR XX and NX options at the same time are not compatible"));
  EXPECT_EQ(Run({"ZADD", "z", "GT", "LT", "1", "a"}),
            E("ERR GT, LT, and/or NX options at the same time are not compatible"));
  EXPECT_EQ(Run({"ZADD", "z", "INCR", "1", "a", "2", "b"}),
            E("ERR INCR option supports a single increment-element pair"));
  EXPECT_EQ(Run({"ZADD", "z", "1", "a", "2"}), E("ERR syntax error"));
}

TEST_F(FakeRedisZSetTest, ScoresParseAndPrintLikeRedis70) {
  EXPECT_EQ(Run({"ZADD", "z", "1.1", "a", "-inf", "b", "+inf", "c", "0x10", "d"}), I(4));
  EXPECT_EQ(Run({"ZSCORE", "z", "a"}), S("1.1000000000000001"));  // %.17g
  EXPECT_EQ(Run({"ZSCORE", "z", "b"}), S("-inf"));
  EXPECT_EQ(Run({"ZSCORE", "z", "c"}), S("inf"));
  EXPECT_EQ(Run({"ZSCORE", "z", "d"}), S("16"));
  for (const char* bad : {"nan", "abc", "", " 1", "1 ", "1e309", "1e-400"}) {
    EXPECT_EQ(Run({"ZADD", "z", bad, "x"}), E(kNotFloat)) << bad;
  }
  EXPECT_EQ(Run({"ZINCRBY", "z", "-inf", "c"}), E("ERR resulting score is not a number (NaN)"));
  EXPECT_EQ(Run({"ZINCRBY", "n", "-0", "a"}), S("-0"));
  EXPECT_EQ(Run({"ZSCORE", "n", "a"}), S("0"));
}

TEST_F(FakeRedisZSetTest, WrongTypeComesAfterArgumentChecks) {
  Run({"SET", "s", "v"});
  EXPECT_EQ(Run({"ZADD", "s", "abc", "m"}), E(kNotFloat));
  EXPECT_EQ(Run({"ZADD", "s", "1", "m"}), E(kWrongType));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "s", "x", "1"}), E(kRangeNotFloat));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "s", "0", "1"}), E(kWrongType));
  EXPECT_EQ(Run({"ZCARD", "s"}), E(kWrongType));
  EXPECT_EQ(Run({"ZPOPMIN", "s"}), E(kWrongType));
  Run({"ZADD", "z", "1", "a"});
  EXPECT_EQ(Run({"GET", "z"}), E(kWrongType));
  EXPECT_EQ(Run({"HGET", "z", "f"}), E(kWrongType));
}

TEST_F(FakeRedisZSetTest, RangeByScoreWithExclusiveEndsInfinitiesAndLimit) {
  Run({"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"});
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "(1", "3"}), A({S("b"), S("c")}));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "-inf", "(3", "WITHSCORES"}),
            A({S("a"), S("1"), S("b"), S("2")}));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"}),
            A({S("b"), S("c")}));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"}), A({}));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "3", "-1"}), A({S("d")}));
  EXPECT_EQ(Run({"ZRANGE", "z", "(4", "2", "BYSCORE", "REV"}), A({S("c"), S("b")}));
  EXPECT_EQ(Run({"ZRANGE", "z", "0", "1", "LIMIT", "0", "1"}),
            E("ERR syntax error, LIMIT is only supported in combination with either BYSCORE "
              "or BYLEX"));
  EXPECT_EQ(Run({"ZRANGEBYSCORE", "z", "0", "1", "REV"}), E("ERR syntax error"));
  EXPECT_EQ(Run({"ZRANGE", "z", "-2", "-1", "REV"}), A({S("b"), S("a")}));
  EXPECT_EQ(Run({"ZRANGE", "missing", "0", "-1"}), A({}));
}

TEST_F(FakeRedisZSetTest, RemoveRangesPopAndDeleteTheEmptyKey) {
  Run({"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"});
  EXPECT_EQ(Run({"ZREMRANGEBYSCORE", "z", "-inf", "(2"}), I(1));
  EXPECT_EQ(Run({"ZREMRANGEBYRANK", "z", "-1", "-1"}), I(1));
  EXPECT_EQ(Run({"ZRANGE", "z", "0", "-1", "WITHSCORES"}), A({S("b"), S("2"), S("c"), S("3")}));
  EXPECT_EQ(Run({"ZPOPMIN", "z"}), A({S("b"), S("2")}));
  EXPECT_EQ(Run({"ZPOPMIN", "z", "-1"}), E("ERR value is out of range, must be positive"));
  EXPECT_EQ(Run({"ZPOPMIN", "z", "5"}), A({S("c"), S("3")}));
  EXPECT_EQ(Run({"EXISTS", "z"}), I(0));
  Run({"ZADD", "z", "1", "a"});
  EXPECT_EQ(Run({"ZREM", "z", "x", "a", "b"}), I(1));
  EXPECT_EQ(Run({"EXISTS", "z"}), I(0));
}

TEST_F(FakeRedisZSetTest, ZSetKeysExpireOnTheLoopClock) {
  Run({"ZADD", "z", "1", "a"});
  EXPECT_EQ(Run({"PEXPIRE", "z", "100"}), I(1));
  EXPECT_EQ(Run({"ZADD", "z", "2", "b"}), I(1));  // writes keep the TTL
  EXPECT_EQ(Run({"PTTL", "z"}), I(100));
  loop_.AdvanceTime(absl::Milliseconds(101));
  EXPECT_EQ(Run({"ZCARD", "z"}), I(0));
  EXPECT_EQ(Run({"TYPE", "z"}), Reply::Status("none"));
}

TEST_F(FakeRedisZSetTest, CallableFromScripts) {
  const std::string body =
      "redis.call('zadd', KEYS[1], 1, 'a', 2.5, 'b') "
      "redis.call('zremrangebyscore', KEYS[1], '-inf', 1) "
      "return {redis.call('zcard', KEYS[1]), redis.call('zrange', KEYS[1], 0, -1, "
      "'withscores'), redis.call('zscore', KEYS[1], 'a')}";
  EXPECT_EQ(Run({"EVAL", body, "1", "z"}), A({I(1), A({S("b"), S("2.5")}), Nil()}));
  const std::string bad = "return redis.pcall('zrangebyscore', KEYS[1], 'x', 1)";
  EXPECT_EQ(Run({"EVAL", bad, "1", "z"}), E(kRangeNotFloat));
}

}  // namespace
}  // namespace dlock
