#include "dlock/lock/observer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class TextLockObserverTest : public ::testing::Test {
 protected:
  std::vector<std::string> lines_;
  TextLockObserver observer_{
      [this](absl::string_view line) { lines_.emplace_back(line); }};
};

TEST(NoopLockObserverTest, IsNeverNullAndIsTheDefaultForNull) {
  LockObserver* noop = NoopLockObserver();
  ASSERT_NE(noop, nullptr);
  EXPECT_EQ(ObserverOrNoop(nullptr), noop);
  noop->OnAcquire(AcquireEvent{});  // ignores events
  TextLockObserver text([](absl::string_view) {});
  EXPECT_EQ(ObserverOrNoop(&text), &text);
}

TEST_F(TextLockObserverTest, AcquireLineCarriesOutcomeAttemptsAndFence) {
  AcquireEvent e;
  e.policy = "retry";
  e.resource = "orders/42";
  e.latency = absl::Milliseconds(12);
  e.waited = absl::Milliseconds(10);
  e.attempts = 3;
  e.fence = 7;
  e.ttl = absl::Seconds(30);
  observer_.OnAcquire(e);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0],
            "acquire retry \"orders/42\": OK in 12ms (3 attempts, waited "
            "10ms) fence=7 ttl=30s");
}

TEST_F(TextLockObserverTest, FailedAcquireHasNoFence) {
  AcquireEvent e;
  e.policy = "simple";
  e.resource = "r";
  e.status = absl::AbortedError("held");
  e.attempts = 1;
  observer_.OnAcquire(e);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("ABORTED: held"));
  EXPECT_THAT(lines_[0], HasSubstr("(1 attempt,"));
  EXPECT_THAT(lines_[0], Not(HasSubstr("fence=")));
}

TEST_F(TextLockObserverTest, ResourceBytesAreEscaped) {
  ReleaseEvent e;
  e.policy = "simple";
  e.resource = absl::string_view("a\0\n\"b", 5);
  observer_.OnRelease(e);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("\"a\\000\\n\\\"b\""));
  EXPECT_EQ(lines_[0].find('\n'), std::string::npos);
}

TEST_F(TextLockObserverTest, ReleaseWarningIsPrinted) {
  ReleaseEvent e;
  e.policy = "simple";
  e.resource = "r";
  e.latency = absl::Milliseconds(1);
  observer_.OnRelease(e);
  e.warning = "waiters will not be woken";
  observer_.OnRelease(e);
  EXPECT_THAT(lines_, ElementsAre("release simple \"r\": OK in 1ms",
                                  "release simple \"r\": OK in 1ms; warning: waiters will "
                                  "not be woken"));
}

TEST_F(TextLockObserverTest, EveryEventBecomesOneLine) {
  observer_.OnAcquireWait(AcquireWaitEvent{"retry", "r", 2,
                                           absl::AbortedError("busy"),
                                           absl::Milliseconds(50),
                                           absl::Seconds(9)});
  observer_.OnExtend(ExtendEvent{"simple", "r", absl::OkStatus(),
                                 absl::Milliseconds(1), absl::Seconds(30)});
  observer_.OnRenewal(RenewalEvent{"r", absl::OkStatus(), absl::Milliseconds(1),
                                   absl::Seconds(20), 3});
  observer_.OnLeaseLost(LeaseLostEvent{
      "r", absl::DeadlineExceededError("no renewal"), absl::Seconds(41)});
  observer_.OnServerVote(ServerVoteEvent{"r", "acquire", 1, "127.0.0.1:7000",
                                         absl::UnavailableError("down"),
                                         absl::Milliseconds(5)});
  EXPECT_THAT(
      lines_,
      ElementsAre(HasSubstr("wait retry \"r\": attempt 2 got ABORTED: busy"),
                  HasSubstr("extend simple \"r\" to 30s: OK"),
                  HasSubstr("renewal \"r\": OK in 1ms, margin 20s (#3)"),
                  HasSubstr("lost \"r\" after 41s: DEADLINE_EXCEEDED"),
                  HasSubstr("vote acquire \"r\" server #1 127.0.0.1:7000: "
                            "UNAVAILABLE: down")));
}

TEST_F(TextLockObserverTest, LateGrantLineSaysWhyAndNamesTheServerIfAny) {
  observer_.OnLateGrant(
      LateGrantEvent{"redlock", "orders/42", "acquire", kLateGrantReleased, 2, "10.0.0.3:6379"});
  observer_.OnLateGrant(LateGrantEvent{"simple", "r", "acquire", kLateGrantCancelled});
  observer_.OnLateGrant(LateGrantEvent{"redlock", "r", "extend", kLateGrantReleased, 0, ""});
  EXPECT_THAT(lines_,
              ElementsAre("late grant redlock acquire \"orders/42\" server #2 10.0.0.3:6379: "
                          "released again (lease released)",
                          "late grant simple acquire \"r\": released again (cancelled)",
                          "late grant redlock extend \"r\" server #0: released again "
                          "(lease released)"));
}

}  // namespace
}  // namespace dlock
