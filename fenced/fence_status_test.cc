#include "dlock/fenced/fence_status.h"

#include "gtest/gtest.h"

namespace dlock {
namespace fenced {
namespace {

TEST(FenceStatusTest, StaleCarriesTheHighestFence) {
  absl::Status s = StaleFenceError("order:7", 3, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsStaleFence(s));
  EXPECT_EQ(HighestSeenFence(s), absl::optional<int64_t>(9));
  EXPECT_NE(s.message().find("stale fence 3 < highest 9"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("order:7"), absl::string_view::npos) << s;
}

TEST(FenceStatusTest, OtherStatusesAreNotStale) {
  EXPECT_FALSE(IsStaleFence(absl::OkStatus()));
  EXPECT_FALSE(IsStaleFence(absl::FailedPreconditionError("not the owner")));
  EXPECT_FALSE(IsStaleFence(absl::UnavailableError("down")));
  EXPECT_EQ(HighestSeenFence(absl::UnavailableError("down")), absl::nullopt);
}

TEST(FenceStatusTest, BadArgumentsAreInvalid) {
  EXPECT_EQ(CheckFenceArgs("", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckFenceArgs("r", 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckFenceArgs("r", -4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckFenceArgs("r", 1).ok());
}

}  // namespace
}  // namespace fenced
}  // namespace dlock
