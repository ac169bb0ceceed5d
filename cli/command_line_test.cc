#include "dlock/cli/command_line.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/flags.h"
#include "dlock/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CommandLineTest : public ::testing::Test {
 protected:
  absl::FlagSaver saver_;  // restores every flag after each test
};

TEST_F(CommandLineTest, SplitsSubcommandRepeatedRedisAndCommand) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(
      {"dlock", "run", "--redis", "redis://a:1", "--redis=redis://b:2",
       "--ttl=5s", "--on-lost", "kill", "--verbose", "job", "--", "sh", "-c",
       "echo --ttl=1s"});
  ASSERT_THAT(cl, IsOk());
  EXPECT_THAT(cl->positional, ElementsAre("run", "job"));
  EXPECT_THAT(cl->redis_urls, ElementsAre("redis://a:1", "redis://b:2"));
  EXPECT_TRUE(cl->has_separator);
  EXPECT_THAT(cl->command, ElementsAre("sh", "-c", "echo --ttl=1s"));
  EXPECT_EQ(absl::GetFlag(FLAGS_ttl), absl::Seconds(5));
  EXPECT_EQ(absl::GetFlag(FLAGS_on_lost), "kill");
  EXPECT_TRUE(absl::GetFlag(FLAGS_verbose));
  EXPECT_FALSE(cl->help);
}

TEST_F(CommandLineTest, ANegativeNumberIsAnArgumentNotAFlag) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(
      {"dlock", "fenced-incr", "--fence", "3", "--floor", "-5", "sku", "stock:{sku}", "-1"});
  ASSERT_THAT(cl, IsOk());
  EXPECT_THAT(cl->positional, ElementsAre("fenced-incr", "sku", "stock:{sku}", "-1"));
  EXPECT_EQ(absl::GetFlag(FLAGS_floor), -5);
  EXPECT_EQ(absl::GetFlag(FLAGS_fence), 3);
  EXPECT_THAT(ParseCommandLine({"dlock", "-1x"}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(CommandLineTest, BooleanNegationAndHelp) {
  absl::SetFlag(&FLAGS_verbose, true);
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"dlock", "--noverbose", "--help", "check"});
  ASSERT_THAT(cl, IsOk());
  EXPECT_FALSE(absl::GetFlag(FLAGS_verbose));
  EXPECT_TRUE(cl->help);
  EXPECT_THAT(cl->redis_urls, IsEmpty());
  EXPECT_FALSE(cl->has_separator);
}

TEST_F(CommandLineTest, RejectsBadDurationWithHint) {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"dlock", "run", "--ttl", "30x", "r", "--", "true"});
  EXPECT_THAT(cl, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cl.status().message(), HasSubstr("--ttl"));
  EXPECT_THAT(cl.status().message(), HasSubstr("500ms"));
}

TEST_F(CommandLineTest, RejectsUnknownFlagAndMissingValue) {
  EXPECT_THAT(ParseCommandLine({"dlock", "--bogus", "run"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCommandLine({"dlock", "run", "r", "--wait"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCommandLine({"dlock", "run", "r", "--ttl", "--", "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Abseil's own flags are not dlock's.
  EXPECT_THAT(ParseCommandLine({"dlock", "--flagfile=/etc/passwd", "check"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(CommandLineTest, UsageListsSubcommandsExitCodesAndFlags) {
  std::string text = UsageText("dlock");
  EXPECT_THAT(text, HasSubstr("dlock run"));
  EXPECT_THAT(text, HasSubstr("dlock status"));
  EXPECT_THAT(text, HasSubstr("dlock check"));
  EXPECT_THAT(text, HasSubstr("75 lock busy"));
  EXPECT_THAT(text, HasSubstr("--on-lost (default: term)"));
  EXPECT_THAT(text, HasSubstr("--ttl (default: 30s)"));
}

TEST(ExitCodeForStatusTest, MapsLibraryCodesToSysexits) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), 0);
  // E.g. RedLock refusing the same Redis instance twice.
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError(
                "servers 0 and 1 are the same Redis instance")),
            64);
  EXPECT_EQ(ExitCodeForStatus(absl::PermissionDeniedError("NOPERM")), 77);
  EXPECT_EQ(ExitCodeForStatus(absl::AbortedError("busy")), 75);
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("down")), 69);
  EXPECT_EQ(ExitCodeForStatus(absl::DeadlineExceededError("slow")), 69);
  EXPECT_EQ(ExitCodeForStatus(absl::InternalError("bug")), 70);
  EXPECT_EQ(ExitCodeForStatus(absl::FailedPreconditionError("x")), 70);
}

}  // namespace
}  // namespace cli
}  // namespace dlock
