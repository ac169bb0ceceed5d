// The scripts' constant SHA-1s (lock/scripts.cc, redlock/fence_sync.cc) are the ids a real
// redis-server gives them: SCRIPT LOAD answers each constant.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore_scripts.h"
#include "dlock/redlock/fence_sync.h"
#include "dlock/testing/redis_server.h"

namespace dlock {
namespace {

TEST(ScriptsSha1RealTest, ScriptLoadAnswersEachConstant) {
  absl::StatusOr<std::unique_ptr<test_support::RedisServer>> server =
      test_support::RedisServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<NamedScript> scripts = AllScripts();
  for (const NamedScript& s : SemaphoreScripts()) scripts.push_back(s);
  for (const NamedScript& s : HandOffScripts()) scripts.push_back(s);
  for (const NamedScript& s : scripts) {
    absl::StatusOr<Reply> reply =
        (*server)->Command({"SCRIPT", "LOAD", s.script->source()});
    ASSERT_TRUE(reply.ok()) << s.name << ": " << reply.status();
    ASSERT_TRUE(reply->is_string()) << s.name << ": " << reply->DebugString();
    EXPECT_EQ(reply->str, s.script->sha1()) << s.name;
  }
  // RedLock's fence write-back (redlock/fence_sync.cc).
  const Script& raise = redlock_internal::RaiseFenceScript();
  absl::StatusOr<Reply> reply = (*server)->Command({"SCRIPT", "LOAD", raise.source()});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->str, raise.sha1()) << "raise_fence";
}

}  // namespace
}  // namespace dlock
