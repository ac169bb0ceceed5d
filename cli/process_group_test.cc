#include "dlock/cli/process_group.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

TEST(GroupAliveTest, SeesAGroupUntilItsLastProcessIsGone) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    for (;;) pause();
  }
  // Both sides set the group, so it exists whoever runs first.
  setpgid(pid, pid);
  EXPECT_TRUE(GroupAlive(pid, -1));
  EXPECT_FALSE(GroupAlive(pid, pid));  // its only member is excluded
  kill(pid, SIGKILL);
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_FALSE(GroupAlive(pid, -1));
}

TEST(SpawnInGroupTest, RunsTheCommandAsLeaderOfItsOwnGroup) {
  pid_t seen = -1;
  bool failed = false;
  Spawned s = SpawnInGroup({"true"}, {"PATH=/bin:/usr/bin"}, 0,
                           [&](pid_t pgid) { seen = pgid; }, [&] { failed = true; });
  ASSERT_GT(s.pid, 0);
  EXPECT_EQ(seen, s.pid);
  EXPECT_FALSE(failed);
  int st;
  ASSERT_EQ(waitpid(s.pid, &st, 0), s.pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(SpawnInGroupTest, ReportsAnExecFailureAndReapsTheChild) {
  bool failed = false;
  Spawned s = SpawnInGroup({"/nonexistent/dlock-test-command"}, {}, 0, [](pid_t) {},
                           [&] { failed = true; });
  EXPECT_LE(s.pid, 0);
  EXPECT_EQ(s.error, ENOENT);
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace cli
}  // namespace dlock
