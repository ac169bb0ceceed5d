#include "dlock/transport/reply.h"

#include <string>

#include "gtest/gtest.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

TEST(ReplyTest, DebugStringEscapesBytesAndNestsArrays) {
  Reply r = Reply::Array({Reply::String(std::string("a\0b", 3)), Reply::Integer(-5),
                          Reply::Nil(), Reply::Status("OK"), Reply::Error("ERR x")});
  EXPECT_EQ(r.DebugString(), "[\"a\\x00\\x62\", (integer) -5, nil, (status) OK, (error) ERR x]");
}

TEST(ReplyTest, EqualityComparesTypeAndPayload) {
  EXPECT_EQ(Reply::String("x"), Reply::String("x"));
  EXPECT_NE(Reply::String("x"), Reply::Status("x"));
  EXPECT_NE(Reply::Integer(1), Reply::Integer(2));
  EXPECT_EQ(Reply::Nil(), Reply());
  EXPECT_NE(Reply::Array({Reply::Nil()}), Reply::Array({}));
}

TEST(ReplyTest, ErrorPrefixMatchesOnlyErrors) {
  EXPECT_TRUE(Reply::Error("NOSCRIPT No matching script").IsErrorWithPrefix("NOSCRIPT"));
  EXPECT_FALSE(Reply::String("NOSCRIPT").IsErrorWithPrefix("NOSCRIPT"));
}

TEST(ScriptTest, Sha1MatchesRedis) {
  // redis-cli SCRIPT LOAD "return 1" -> e0e1f9fabfc9d4800c877a703b823ac0578ff8db
  EXPECT_EQ(Script("return 1").sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  Script s("return 1");
  auto argv = s.EvalShaArgv({"k"}, {"a", "b"});
  ASSERT_EQ(argv.size(), 6u);
  EXPECT_EQ(argv[0], "EVALSHA");
  EXPECT_EQ(argv[2], "1");
  EXPECT_EQ(argv[5], "b");
}

}  // namespace
}  // namespace dlock
