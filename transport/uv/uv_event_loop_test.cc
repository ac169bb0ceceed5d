#include "dlock/transport/uv/uv_event_loop.h"

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "dlock/transport/uv/uv_test_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;

class UvEventLoopTest : public ::testing::Test {
 protected:
  void TearDown() override {
    events_.reset();
    EXPECT_EQ(loop_.Close(), 0);
  }

  test_support::UvTestLoop loop_;
  std::unique_ptr<UvEventLoop> events_ = std::make_unique<UvEventLoop>(loop_.get());
};

TEST_F(UvEventLoopTest, NowIsMonotonic) {
  absl::Time a = events_->Now();
  absl::Time b = events_->Now();
  EXPECT_LE(a, b);
}

TEST_F(UvEventLoopTest, TimersRunByDeadlineThenInsertionOrder) {
  std::vector<std::string> order;
  events_->RunAfter(absl::Milliseconds(30), [&] { order.push_back("30a"); });
  events_->RunAfter(absl::Milliseconds(10), [&] { order.push_back("10"); });
  events_->RunAfter(absl::Milliseconds(30), [&] { order.push_back("30b"); });
  events_->RunAfter(absl::ZeroDuration(), [&] { order.push_back("0a"); });
  events_->RunAfter(absl::Milliseconds(-5), [&] { order.push_back("neg"); });
  events_->RunAfter(absl::ZeroDuration(), [&] { order.push_back("0b"); });
  ASSERT_TRUE(loop_.RunUntil([&] { return order.size() == 6; }));
  EXPECT_THAT(order, ElementsAre("0a", "neg", "0b", "10", "30a", "30b"));
}

TEST_F(UvEventLoopTest, ManyTimersWithTheSameDelayRunInInsertionOrder) {
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    events_->RunAfter(absl::Milliseconds(5), [&order, i] { order.push_back(i); });
  }
  ASSERT_TRUE(loop_.RunUntil([&] { return order.size() == 100; }));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(UvEventLoopTest, TimerRunsNoEarlierThanItsDelay) {
  const absl::Time start = events_->Now();
  absl::Time ran = absl::InfinitePast();
  events_->RunAfter(absl::Milliseconds(20), [&] { ran = events_->Now(); });
  ASSERT_TRUE(loop_.RunUntil([&] { return ran != absl::InfinitePast(); }));
  EXPECT_GE(ran - start, absl::Milliseconds(20));
}

TEST_F(UvEventLoopTest, ZeroDelayNeverRunsInsideRunAfter) {
  bool ran = false;
  events_->RunAfter(absl::ZeroDuration(), [&] { ran = true; });
  EXPECT_FALSE(ran);
  ASSERT_TRUE(loop_.RunUntil([&] { return ran; }));
}

TEST_F(UvEventLoopTest, CancelDestroysTheCallbackAndItNeverRuns) {
  bool ran = false;
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> weak = token;
  TimerId id = events_->RunAfter(absl::Milliseconds(5),
                                 [&ran, token = std::move(token)] { ran = true; });
  bool other = false;
  events_->RunAfter(absl::Milliseconds(10), [&] { other = true; });
  EXPECT_TRUE(events_->Cancel(id));
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(events_->Cancel(id));
  ASSERT_TRUE(loop_.RunUntil([&] { return other; }));
  EXPECT_FALSE(ran);
}

TEST_F(UvEventLoopTest, CancellingTheLastTimerLetsTheLoopEndAtOnce) {
  TimerId id = events_->RunAfter(absl::Hours(1), [] {});
  EXPECT_NE(uv_loop_alive(loop_.get()), 0);
  EXPECT_TRUE(events_->Cancel(id));
  // Nothing is due any more: the uv timer no longer keeps the loop alive
  // until the cancelled deadline.
  EXPECT_EQ(uv_loop_alive(loop_.get()), 0);
}

TEST_F(UvEventLoopTest, CancellingTheEarliestTimerKeepsTheLaterOneArmed) {
  bool later = false;
  TimerId id = events_->RunAfter(absl::Hours(1), [] {});
  events_->RunAfter(absl::Milliseconds(5), [&] { later = true; });
  EXPECT_TRUE(events_->Cancel(id));
  TimerId early = events_->RunAfter(absl::Milliseconds(1), [] {});
  EXPECT_TRUE(events_->Cancel(early));
  ASSERT_TRUE(loop_.RunUntil([&] { return later; }));
  EXPECT_EQ(uv_loop_alive(loop_.get()), 0);
}

TEST_F(UvEventLoopTest, CancelAfterRunOrOfUnknownIdReturnsFalse) {
  bool ran = false;
  TimerId id = events_->RunAfter(absl::ZeroDuration(), [&] { ran = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return ran; }));
  EXPECT_FALSE(events_->Cancel(id));
  EXPECT_FALSE(events_->Cancel(0));
  EXPECT_FALSE(events_->Cancel(12345));
}

TEST_F(UvEventLoopTest, CallbackCanCancelALaterDueTimer) {
  bool second_ran = false;
  TimerId second = 0;
  bool first_ran = false;
  events_->RunAfter(absl::Milliseconds(5), [&] {
    first_ran = true;
    EXPECT_TRUE(events_->Cancel(second));
  });
  second = events_->RunAfter(absl::Milliseconds(5), [&] { second_ran = true; });
  bool third = false;
  events_->RunAfter(absl::Milliseconds(15), [&] { third = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return third; }));
  EXPECT_TRUE(first_ran);
  EXPECT_FALSE(second_ran);
}

TEST_F(UvEventLoopTest, TimerAddedByACallbackRunsOnALaterPass) {
  int count = 0;
  std::function<void()> again = [&] {
    if (++count < 1000) events_->RunAfter(absl::ZeroDuration(), again);
  };
  events_->RunAfter(absl::ZeroDuration(), again);
  ASSERT_TRUE(loop_.RunUntil([&] { return count == 1000; }));
}

TEST_F(UvEventLoopTest, DestroyingDropsPendingCallbacksAndTheLoopClosesClean) {
  bool ran = false;
  events_->RunAfter(absl::Milliseconds(1), [&] { ran = true; });
  EXPECT_EQ(events_->pending_timers(), 1u);
  events_.reset();
  loop_.RunFor(absl::Milliseconds(10));
  EXPECT_FALSE(ran);
}

TEST_F(UvEventLoopTest, MayBeDestroyedInsideItsOwnCallback) {
  bool later_ran = false;
  bool destroyed = false;
  events_->RunAfter(absl::Milliseconds(1), [&] {
    events_.reset();
    destroyed = true;
  });
  events_->RunAfter(absl::Milliseconds(1), [&] { later_ran = true; });
  ASSERT_TRUE(loop_.RunUntil([&] { return destroyed; }));
  loop_.RunFor(absl::Milliseconds(10));
  EXPECT_FALSE(later_ran);
}

}  // namespace
}  // namespace dlock
