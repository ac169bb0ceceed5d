#include "dlock/transport/uv/reconnect_backoff.h"

#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(ReconnectBackoffTest, DoublesFromTheMinimumUpToTheMaximum) {
  ReconnectBackoff b(absl::Milliseconds(100), absl::Seconds(1), /*jitter=*/0);
  EXPECT_EQ(b.Delay(1), absl::Milliseconds(100));
  EXPECT_EQ(b.Delay(2), absl::Milliseconds(200));
  EXPECT_EQ(b.Delay(4), absl::Milliseconds(800));
  EXPECT_EQ(b.Delay(5), absl::Seconds(1));
  EXPECT_EQ(b.Delay(1000), absl::Seconds(1));
}

TEST(ReconnectBackoffTest, JitterTakesUpToItsFractionOff) {
  ReconnectBackoff b(absl::Milliseconds(100), absl::Seconds(1), /*jitter=*/0.5);
  bool below_full = false;
  for (int i = 0; i < 200; ++i) {
    const absl::Duration d = b.Delay(2);
    EXPECT_GE(d, absl::Milliseconds(100));
    EXPECT_LE(d, absl::Milliseconds(200));
    below_full |= d < absl::Milliseconds(190);
  }
  EXPECT_TRUE(below_full);  // 200 draws all in the top 5%: jitter is off
}

}  // namespace
}  // namespace dlock
