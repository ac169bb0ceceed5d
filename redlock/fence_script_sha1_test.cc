// RedLock's fence write-back script carries a constant SHA-1 (fence_sync.cc),
// like lock/scripts.cc's: it must be the SHA-1 of its source, as OpenSSL
// computes it and as SCRIPT LOAD answers.
#include "dlock/redlock/fence_sync.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(FenceScriptSha1Test, ConstantIsTheSha1OfItsSource) {
  const Script& s = redlock_internal::RaiseFenceScript();
  EXPECT_EQ(s.sha1(), Sha1Hex(s.source())) << "update the constant in redlock/fence_sync.cc";
}

TEST(FenceScriptSha1Test, FakeRedisScriptLoadAnswersTheConstant) {
  ManualEventLoop loop;
  FakeRedis server(&loop);
  const Script& s = redlock_internal::RaiseFenceScript();
  Reply reply = server.Execute({"SCRIPT", "LOAD", s.source()});
  ASSERT_TRUE(reply.is_string()) << reply.DebugString();
  EXPECT_EQ(reply.str, s.sha1());
}

}  // namespace
}  // namespace dlock
