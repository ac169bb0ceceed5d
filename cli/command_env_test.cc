#include "dlock/cli/command_env.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

using ::testing::ElementsAre;

Lease MakeLease() {
  Lease lease;
  lease.resource = "inv";
  lease.fence = 42;
  return lease;
}

TEST(CommandEnvironmentTest, ReplacesInheritedLeaseVariablesAndKeepsTheRest) {
  char a[] = "PATH=/bin", b[] = "DLOCK_FENCE=1", c[] = "DLOCK_FENCES=1 2",
       d[] = "DLOCK_RESOURCE=old", e[] = "DLOCK_FENCE_X=kept";
  char* base[] = {a, b, c, d, e, nullptr};
  EXPECT_THAT(CommandEnvironment(base, MakeLease(), std::nullopt),
              ElementsAre("PATH=/bin", "DLOCK_FENCE_X=kept", "DLOCK_FENCE=42",
                          "DLOCK_RESOURCE=inv"));
}

TEST(CommandEnvironmentTest, SeveralResourcesGetEachFenceInOrder) {
  char* base[] = {nullptr};
  Lease lease = MakeLease();
  lease.resource = "a,b";
  EXPECT_THAT(CommandEnvironment(base, lease, std::vector<int64_t>{7, 3}),
              ElementsAre("DLOCK_FENCE=42", "DLOCK_RESOURCE=a,b", "DLOCK_FENCES=7 3"));
}

}  // namespace
}  // namespace cli
}  // namespace dlock
