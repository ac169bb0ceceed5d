#include "dlock/transport/fake/manual_event_loop.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ManualEventLoopTest : public ::testing::Test {
 protected:
  ManualEventLoop loop_;
  std::vector<std::string> log_;

  absl::AnyInvocable<void() &&> Log(std::string what) {
    return [this, what] { log_.push_back(what); };
  }
};

TEST_F(ManualEventLoopTest, NowStartsAtFixedOriginAndNeverTicksOnItsOwn) {
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin());
  EXPECT_NE(loop_.Now(), absl::UnixEpoch());
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin());
  ManualEventLoop other;
  EXPECT_EQ(other.Now(), loop_.Now());
}

TEST_F(ManualEventLoopTest, ZeroDelayCallbackRunsOnlyWhenLoopIsDriven) {
  loop_.RunAfter(absl::ZeroDuration(), Log("a"));
  EXPECT_THAT(log_, IsEmpty());  // never inside RunAfter
  EXPECT_EQ(loop_.RunUntilIdle(), 1u);
  EXPECT_THAT(log_, ElementsAre("a"));
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin());
}

TEST_F(ManualEventLoopTest, NegativeDelayIsTreatedAsZero) {
  loop_.RunAfter(absl::Seconds(-5), Log("neg"));
  loop_.RunAfter(absl::ZeroDuration(), Log("zero"));
  loop_.RunUntilIdle();
  EXPECT_THAT(log_, ElementsAre("neg", "zero"));
}

TEST_F(ManualEventLoopTest, RunUntilIdleDrainsWorkPostedByCallbacksButNotFutureTimers) {
  loop_.RunAfter(absl::ZeroDuration(), [this] {
    log_.push_back("first");
    loop_.RunAfter(absl::ZeroDuration(), Log("posted"));
    loop_.RunAfter(absl::Milliseconds(1), Log("future"));
  });
  EXPECT_EQ(loop_.RunUntilIdle(), 2u);
  EXPECT_THAT(log_, ElementsAre("first", "posted"));
  EXPECT_EQ(loop_.pending(), 1u);
  EXPECT_EQ(loop_.NextDeadline(), ManualEventLoop::Origin() + absl::Milliseconds(1));
}

TEST_F(ManualEventLoopTest, AdvanceTimeFiresDueTimersInDeadlineOrder) {
  loop_.RunAfter(absl::Milliseconds(30), Log("30"));
  loop_.RunAfter(absl::Milliseconds(10), Log("10"));
  loop_.RunAfter(absl::Milliseconds(20), Log("20"));
  loop_.RunAfter(absl::Milliseconds(40), Log("40"));
  EXPECT_EQ(loop_.AdvanceTime(absl::Milliseconds(30)), 3u);
  EXPECT_THAT(log_, ElementsAre("10", "20", "30"));
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin() + absl::Milliseconds(30));
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_EQ(log_.size(), 3u);
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(log_, ElementsAre("10", "20", "30", "40"));
}

TEST_F(ManualEventLoopTest, TimersWithEqualDeadlinesRunInInsertionOrder) {
  loop_.RunAfter(absl::Milliseconds(5), Log("a"));
  loop_.RunAfter(absl::Milliseconds(5), Log("b"));
  loop_.AdvanceTime(absl::Milliseconds(2));
  // Added later with a shorter delay, but due at the same instant: runs last.
  loop_.RunAfter(absl::Milliseconds(3), Log("c"));
  loop_.RunAfter(absl::Milliseconds(5), Log("d"));
  loop_.AdvanceTime(absl::Milliseconds(3));
  EXPECT_THAT(log_, ElementsAre("a", "b", "c"));
}

TEST_F(ManualEventLoopTest, CallbackSeesItsOwnDeadlineAsNow) {
  std::vector<absl::Duration> seen;
  const absl::Time origin = loop_.Now();
  for (int ms : {7, 3, 12}) {
    loop_.RunAfter(absl::Milliseconds(ms),
                   [&, origin] { seen.push_back(loop_.Now() - origin); });
  }
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(seen, ElementsAre(absl::Milliseconds(3), absl::Milliseconds(7),
                                absl::Milliseconds(12)));
  EXPECT_EQ(loop_.Now() - origin, absl::Seconds(1));
}

TEST_F(ManualEventLoopTest, TimersAddedWhileAdvancingRunIfTheyFallInsideTheWindow) {
  // A periodic 10 ms timer re-arms itself from its callback.
  int ticks = 0;
  std::function<void()> tick = [&] {
    ++ticks;
    loop_.RunAfter(absl::Milliseconds(10), [&] { tick(); });
  };
  loop_.RunAfter(absl::Milliseconds(10), [&] { tick(); });
  loop_.AdvanceTime(absl::Milliseconds(55));
  EXPECT_EQ(ticks, 5);  // at 10, 20, 30, 40, 50; the one at 60 is pending
  EXPECT_EQ(loop_.pending(), 1u);
  loop_.AdvanceTime(absl::Milliseconds(5));
  EXPECT_EQ(ticks, 6);
}

TEST_F(ManualEventLoopTest, TimerAddedBeyondTheWindowWaits) {
  loop_.RunAfter(absl::Milliseconds(10), [this] {
    loop_.RunAfter(absl::Milliseconds(100), Log("late"));
    loop_.RunAfter(absl::ZeroDuration(), Log("now"));
  });
  loop_.AdvanceTime(absl::Milliseconds(50));
  EXPECT_THAT(log_, ElementsAre("now"));
  loop_.AdvanceTime(absl::Milliseconds(60));
  EXPECT_THAT(log_, ElementsAre("now", "late"));
}

TEST_F(ManualEventLoopTest, CancelPreventsRunAndDestroysCallbackAtOnce) {
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> weak = token;
  TimerId id = loop_.RunAfter(absl::Seconds(1), [token = std::move(token), this] {
    log_.push_back("ran");
  });
  EXPECT_FALSE(weak.expired());
  EXPECT_TRUE(loop_.Cancel(id));
  EXPECT_TRUE(weak.expired());  // destroyed before Cancel returned
  EXPECT_FALSE(loop_.Cancel(id));
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_THAT(log_, IsEmpty());
}

TEST_F(ManualEventLoopTest, CancelReturnsFalseForRunUnknownAndRunningTimers) {
  EXPECT_FALSE(loop_.Cancel(0));
  EXPECT_FALSE(loop_.Cancel(12345));
  TimerId ran = loop_.RunAfter(absl::ZeroDuration(), Log("x"));
  loop_.RunUntilIdle();
  EXPECT_FALSE(loop_.Cancel(ran));
  TimerId self = 0;
  bool cancel_result = true;
  self = loop_.RunAfter(absl::ZeroDuration(), [&] { cancel_result = loop_.Cancel(self); });
  loop_.RunUntilIdle();
  EXPECT_FALSE(cancel_result);
}

TEST_F(ManualEventLoopTest, CallbackCanCancelALaterTimerInTheSameWindow) {
  TimerId later = 0;
  loop_.RunAfter(absl::Milliseconds(1), [&] { EXPECT_TRUE(loop_.Cancel(later)); });
  later = loop_.RunAfter(absl::Milliseconds(2), Log("cancelled"));
  loop_.AdvanceTime(absl::Milliseconds(5));
  EXPECT_THAT(log_, IsEmpty());
}

TEST_F(ManualEventLoopTest, TimerIdsAreNonZeroAndUnique) {
  TimerId a = loop_.RunAfter(absl::ZeroDuration(), [] {});
  TimerId b = loop_.RunAfter(absl::ZeroDuration(), [] {});
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
}

TEST_F(ManualEventLoopTest, NegativeAdvanceAndPastTargetDoNotMoveClockBack) {
  loop_.AdvanceTime(absl::Seconds(1));
  const absl::Time t = loop_.Now();
  loop_.AdvanceTime(absl::Seconds(-1));
  EXPECT_EQ(loop_.Now(), t);
  loop_.AdvanceTo(t - absl::Seconds(1));
  EXPECT_EQ(loop_.Now(), t);
}

TEST_F(ManualEventLoopTest, RunNextJumpsToEarliestTimer) {
  EXPECT_FALSE(loop_.RunNext());
  loop_.RunAfter(absl::Minutes(3), Log("m3"));
  loop_.RunAfter(absl::Minutes(3), Log("m3b"));
  loop_.RunAfter(absl::Minutes(5), Log("m5"));
  EXPECT_TRUE(loop_.RunNext());
  EXPECT_THAT(log_, ElementsAre("m3", "m3b"));
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin() + absl::Minutes(3));
}

TEST_F(ManualEventLoopTest, NestedAdvanceFromCallbackKeepsOrderAndClockMonotonic) {
  loop_.RunAfter(absl::Milliseconds(1), [this] {
    log_.push_back("outer");
    loop_.AdvanceTime(absl::Milliseconds(10));  // runs the 5 ms timer
  });
  loop_.RunAfter(absl::Milliseconds(5), Log("inner"));
  loop_.RunAfter(absl::Milliseconds(20), Log("end"));
  loop_.AdvanceTime(absl::Milliseconds(3));
  EXPECT_THAT(log_, ElementsAre("outer", "inner"));
  EXPECT_EQ(loop_.Now(), ManualEventLoop::Origin() + absl::Milliseconds(11));
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_THAT(log_, ElementsAre("outer", "inner", "end"));
}

TEST_F(ManualEventLoopTest, DestroyingLoopDestroysPendingCallbacksWithoutRunningThem) {
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> weak = token;
  bool ran = false;
  {
    ManualEventLoop loop;
    loop.RunAfter(absl::Seconds(1), [token = std::move(token), &ran] { ran = true; });
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace dlock
