// The scripts' SHA-1s are constants (scripts.cc): each must be the SHA-1 of
// its source, as OpenSSL computes it and as FakeRedis's SCRIPT LOAD answers.
// (tests/lock/scripts_sha1_real_test.cc asks a real server.)
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

// AllScripts(), the semaphore's and the hand-off queue's.
std::vector<NamedScript> EveryScript() {
  std::vector<NamedScript> all = AllScripts();
  for (const NamedScript& s : SemaphoreScripts()) all.push_back(s);
  for (const NamedScript& s : HandOffScripts()) all.push_back(s);
  return all;
}

TEST(ScriptsSha1Test, EachConstantIsTheSha1OfItsSource) {
  for (const NamedScript& s : EveryScript()) {
    EXPECT_EQ(s.script->sha1(), Sha1Hex(s.script->source()))
        << s.name << ": update its constant in lock/scripts.cc (or semaphore_scripts.cc)";
  }
}

TEST(ScriptsSha1Test, FakeRedisScriptLoadAnswersTheConstant) {
  ManualEventLoop loop;
  FakeRedis server(&loop);
  for (const NamedScript& s : EveryScript()) {
    Reply reply = server.Execute({"SCRIPT", "LOAD", s.script->source()});
    ASSERT_TRUE(reply.is_string()) << s.name << ": " << reply.DebugString();
    EXPECT_EQ(reply.str, s.script->sha1()) << s.name;
  }
}

}  // namespace
}  // namespace dlock
