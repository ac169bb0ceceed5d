#include "dlock/transport/uv/held_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "dlock/transport/fake/manual_event_loop.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(HeldCommandsTest, TakeAllReturnsTheItemsInHoldOrderAndCancelsTheirTimers) {
  ManualEventLoop loop;
  HeldCommands<std::string> held(&loop);
  std::vector<std::string> expired;
  for (const char* item : {"c", "a", "b"}) {
    held.Hold(item, absl::Seconds(1), [&](std::string e) { expired.push_back(e); });
  }
  EXPECT_EQ(held.size(), 3u);
  EXPECT_EQ(held.TakeAll(), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(held.size(), 0u);
  EXPECT_EQ(loop.pending(), 0u);
  loop.AdvanceTime(absl::Seconds(2));
  EXPECT_TRUE(expired.empty());
  EXPECT_EQ(loop.pending(), 0u);
}

TEST(HeldCommandsTest, AnItemWhoseTimeoutPassesGoesToItsExpiryAlone) {
  ManualEventLoop loop;
  HeldCommands<int> held(&loop);
  std::vector<int> expired;
  held.Hold(1, absl::Seconds(2), [&](int e) { expired.push_back(e); });
  held.Hold(2, absl::Seconds(1), [&](int e) { expired.push_back(10 * e); });
  loop.AdvanceTime(absl::Seconds(1));
  EXPECT_EQ(expired, std::vector<int>{20});
  EXPECT_EQ(held.TakeAll(), std::vector<int>{1});
}

TEST(HeldCommandsTest, DestroyingTheHolderInsideAnExpiryIsAllowed) {
  ManualEventLoop loop;
  auto held = std::make_unique<HeldCommands<int>>(&loop);
  std::vector<int> expired;
  held->Hold(1, absl::Seconds(1), [&](int e) {
    expired.push_back(e);
    held.reset();
  });
  held->Hold(2, absl::Seconds(1), [&](int e) { expired.push_back(e); });
  loop.AdvanceTime(absl::Seconds(1));
  EXPECT_EQ(expired, std::vector<int>{1});
  EXPECT_EQ(loop.pending(), 0u);
}

}  // namespace
}  // namespace dlock
