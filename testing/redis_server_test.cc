#include "dlock/testing/redis_server.h"

#include <signal.h>

#include <string>

#include "dlock/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace test_support {
namespace {

TEST(RedisServerTest, StartsOnAFreePortAndAnswersCommands) {
  auto server = RedisServer::Start();
  ASSERT_THAT(server, IsOk());
  EXPECT_GT((*server)->port(), 0);
  EXPECT_THAT((*server)->Command({"SET", std::string("k\0ey", 4), std::string("v\0al", 4)}),
              IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT((*server)->Command({"GET", std::string("k\0ey", 4)}),
              IsOkAndHolds(Reply::String(std::string("v\0al", 4))));
  EXPECT_THAT((*server)->Command({"NOSUCHCOMMAND"}), IsOkAndHolds(::testing::Field(
                                                         &Reply::type, Reply::Type::kError)));
}

TEST(RedisServerTest, TwoServersGetDifferentPorts) {
  auto a = RedisServer::Start();
  auto b = RedisServer::Start();
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_NE((*a)->port(), (*b)->port());
}

TEST(RedisServerTest, DestructorStopsTheServerEvenWhenPaused) {
  pid_t pid;
  {
    auto server = RedisServer::Start();
    ASSERT_THAT(server, IsOk());
    pid = (*server)->pid();
    ASSERT_THAT((*server)->Pause(), IsOk());
  }
  // The child has been reaped: the pid no longer names a process of ours.
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST(RedisServerTest, PausedServerDoesNotAnswerUntilResumed) {
  RedisServerOptions options;
  options.command_timeout = absl::Milliseconds(200);
  auto server = RedisServer::Start(options);
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT((*server)->Pause(), IsOk());
  EXPECT_TRUE((*server)->paused());
  EXPECT_THAT((*server)->Command({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT((*server)->Resume(), IsOk());
  EXPECT_THAT((*server)->Command({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST(RedisServerTest, KillThenRestartKeepsThePortAndLosesData) {
  auto server = RedisServer::Start();
  ASSERT_THAT(server, IsOk());
  const int port = (*server)->port();
  ASSERT_THAT((*server)->Command({"SET", "k", "v"}), IsOk());
  ASSERT_THAT((*server)->Kill(), IsOk());
  EXPECT_FALSE((*server)->running());
  EXPECT_THAT((*server)->Command({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT((*server)->Restart(), IsOk());
  EXPECT_EQ((*server)->port(), port);
  EXPECT_THAT((*server)->Command({"GET", "k"}), IsOkAndHolds(Reply::Nil()));
}

TEST(RedisServerTest, AppendOnlyDataSurvivesKillAndRestart) {
  RedisServerOptions options;
  options.appendonly = true;
  auto server = RedisServer::Start(options);
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT((*server)->Command({"SET", "k", "v"}), IsOk());
  ASSERT_THAT((*server)->Kill(), IsOk());
  ASSERT_THAT((*server)->Restart(), IsOk());
  EXPECT_THAT((*server)->Command({"GET", "k"}), IsOkAndHolds(Reply::String("v")));
}

TEST(RedisServerTest, PasswordAndAclUserAreConfigured) {
  RedisServerOptions options;
  options.password = "secret";
  options.extra_args = {"--user", "alice", "on", ">alicepw", "~*", "&*", "+@all"};
  auto server = RedisServer::Start(options);
  ASSERT_THAT(server, IsOk());
  EXPECT_THAT((*server)->Command({"AUTH", "alice", "alicepw"}),
              IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT((*server)->Command({"ACL", "WHOAMI"}), IsOkAndHolds(Reply::String("alice")));
}

TEST(RedisServerTest, UnixSocketIsCreated) {
  RedisServerOptions options;
  options.unix_socket = true;
  auto server = RedisServer::Start(options);
  ASSERT_THAT(server, IsOk());
  EXPECT_FALSE((*server)->unix_socket().empty());
  EXPECT_THAT((*server)->Command({"CONFIG", "GET", "unixsocket"}),
              IsOkAndHolds(Reply::Array({Reply::String("unixsocket"),
                                         Reply::String((*server)->unix_socket())})));
}

TEST(RedisServerTest, BadArgumentsFailWithTheLogInTheMessage) {
  RedisServerOptions options;
  options.extra_args = {"--no-such-option", "1"};
  auto server = RedisServer::Start(options);
  EXPECT_THAT(server, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace test_support
}  // namespace dlock
