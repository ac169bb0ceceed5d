#include "dlock/testing/pg_server.h"

#include <signal.h>

#include <memory>
#include <string>

#include "dlock/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace test_support {
namespace {

TEST(PgServerTest, StartsQueriesAndKeepsCommittedDataAcrossKillAndRestart) {
  absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
  ASSERT_THAT(pg, IsOk());
  PgServer& s = **pg;
  EXPECT_GT(s.port(), 0);
  // It runs as a non-root user (PostgreSQL refuses root).
  EXPECT_THAT(s.QueryValue("SELECT current_setting('listen_addresses')"),
              IsOkAndHolds(std::string("127.0.0.1")));
  ASSERT_THAT(s.Query("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 7)"),
              IsOk());
  EXPECT_THAT(s.QueryValue("SELECT v FROM t WHERE id = 1"), IsOkAndHolds(std::string("7")));

  ASSERT_THAT(s.Kill(), IsOk());
  EXPECT_FALSE(s.process().running());
  EXPECT_THAT(s.Query("SELECT 1"), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(s.Restart(), IsOk());
  EXPECT_THAT(s.QueryValue("SELECT v FROM t WHERE id = 1"), IsOkAndHolds(std::string("7")));
}

TEST(PgServerTest, PauseStopsEveryServerProcessAndResumeContinues) {
  absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
  ASSERT_THAT(pg, IsOk());
  PgServer& s = **pg;
  ASSERT_THAT(s.Query("SELECT 1"), IsOk());
  ASSERT_THAT(s.Pause(), IsOk());
  ASSERT_THAT(s.Resume(), IsOk());
  EXPECT_THAT(s.QueryValue("SELECT 2"), IsOkAndHolds(std::string("2")));
}

TEST(PgServerTest, DestructorStopsTheServer) {
  pid_t pid = -1;
  {
    absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
    ASSERT_THAT(pg, IsOk());
    pid = (*pg)->process().pid();
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, 0), 0);
  }
  // Reaped by the destructor: the pid no longer names our child.
  EXPECT_NE(kill(pid, 0), 0);
}

}  // namespace
}  // namespace test_support
}  // namespace dlock
