// Issue 11: one stated minimum lease TTL (kMinLeaseTtl), enforced by every
// policy as kInvalidArgument from the call itself, with a message stating
// the real accepted range. (RedLock's side: redlock/redlock_ttl_test.cc.)
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

// The status's code is `code` and its message contains `text`.
MATCHER_P2(StatusIsWith, code, text, "") {
  const absl::Status& s = ::dlock::test_support::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code && absl::StrContains(s.message(), text);
}

AcquireOptions Ttl(absl::Duration ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

TEST(LeaseTtlTest, MinimumLeavesValidityAfterTheDefaultDriftAllowance) {
  EXPECT_GE(kMinLeaseTtl, absl::Milliseconds(10));
  EXPECT_GE(kMinLeaseTtl - DriftAllowance(kMinLeaseTtl, kDefaultDriftFactor,
                                          kDefaultDriftConstant),
            kMinLeaseValidity);
  EXPECT_EQ(MinLeaseTtl(kDefaultDriftFactor, kDefaultDriftConstant), kMinLeaseTtl);
}

TEST(LeaseTtlTest, ValidateLeaseTtlStatesTheRealRange) {
  EXPECT_THAT(ValidateLeaseTtl(kMinLeaseTtl), IsOk());
  EXPECT_THAT(ValidateLeaseTtl(kMaxTtl), IsOk());
  // A fraction of a millisecond is truncated (PX is whole ms) before the check.
  EXPECT_THAT(ValidateLeaseTtl(kMinLeaseTtl + absl::Microseconds(999)), IsOk());
  for (absl::Duration bad :
       {absl::ZeroDuration(), absl::Milliseconds(1), absl::Milliseconds(3),
        kMinLeaseTtl - absl::Microseconds(1), absl::Seconds(-1)}) {
    absl::Status s = ValidateLeaseTtl(bad);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("[10ms, 720h]")) << bad;
  }
  EXPECT_THAT(ValidateLeaseTtl(kMaxTtl + absl::Milliseconds(1)),
              StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, 720h]"));
  EXPECT_THAT(ValidateLeaseTtl(absl::InfiniteDuration()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A policy's own maximum is the top of the stated range.
  EXPECT_THAT(ValidateLeaseTtl(absl::Seconds(61), absl::Seconds(60)),
              StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, 1m]"));
  // A larger drift allowance raises the minimum, and the message says so.
  EXPECT_EQ(MinLeaseTtl(0.1, absl::Milliseconds(20)), absl::Milliseconds(28));
  EXPECT_THAT(ValidateLeaseTtl(absl::Milliseconds(27), kMaxTtl, 0.1, absl::Milliseconds(20)),
              StatusIsWith(absl::StatusCode::kInvalidArgument, "[28ms, 720h]"));
  EXPECT_THAT(ValidateLeaseTtl(absl::Milliseconds(28), kMaxTtl, 0.1, absl::Milliseconds(20)),
              IsOk());
  // Drift options that leave no validity at all are refused.
  EXPECT_THAT(ValidateLeaseTtl(absl::Seconds(1), kMaxTtl, 1.0, absl::Milliseconds(2)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateLeaseTtl(absl::Seconds(1), kMaxTtl, -0.1, absl::Milliseconds(2)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateLeaseTtl(absl::Seconds(1), kMaxTtl, 0.01, absl::Milliseconds(-2)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

class PolicyTtlTest : public ::testing::Test {
 protected:
  PolicyTtlTest() : server_(&loop_), conn_(&loop_, &server_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
};

TEST_F(PolicyTtlTest, EveryPolicyRejectsBelowTheMinimumFromTheCallAndAcceptsIt) {
  SimpleLock simple(&loop_, &conn_);
  ReentrantLock reentrant(&loop_, &conn_);
  SimpleLock inner(&loop_, &conn_);
  RetryLock retry(&loop_, &inner);
  int ran = 0;
  auto cb = [&ran](absl::StatusOr<Lease>) { ++ran; };
  for (Lock* lock : std::vector<Lock*>{&simple, &reentrant, &retry}) {
    for (absl::Duration ttl : {absl::Milliseconds(1), absl::Milliseconds(3),
                               absl::Microseconds(9999)}) {
      absl::StatusOr<AcquireHandle> h = lock->Acquire("r", Ttl(ttl), cb);
      EXPECT_THAT(h, StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, "))
          << ttl;
    }
    Lease lease;
    lease.resource = "r";
    lease.token = "t";
    EXPECT_THAT(lock->Extend(lease, absl::Milliseconds(3), cb),
                StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, "));
  }
  loop_.RunUntilIdle();
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(conn_.sent().size(), 0u);

  // The minimum itself is a working lease on every policy.
  for (Lock* lock : std::vector<Lock*>{&simple, &reentrant, &retry}) {
    absl::StatusOr<Lease> got = absl::UnknownError("pending");
    ASSERT_THAT(lock->Acquire("min", Ttl(kMinLeaseTtl),
                              [&](absl::StatusOr<Lease> l) { got = std::move(l); }),
                IsOk());
    loop_.RunUntilIdle();
    ASSERT_THAT(got, IsOk());
    EXPECT_EQ(got->ttl, kMinLeaseTtl);
    EXPECT_GT(got->deadline, loop_.Now());
    absl::Status released = absl::UnknownError("pending");
    ASSERT_THAT(lock->Release(*got, [&](absl::Status s) { released = s; }), IsOk());
    loop_.RunUntilIdle();
    EXPECT_THAT(released, IsOk());
  }
}

TEST_F(PolicyTtlTest, LockCommandsUseTheSameMinimum) {
  LockCommands commands(&conn_, KeyScheme{});
  auto cb = [](absl::StatusOr<int64_t>) {};
  EXPECT_THAT(commands.TryAcquire("r", "t", absl::Milliseconds(3), absl::Seconds(1), cb),
              StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, 720h]"));
  EXPECT_THAT(ValidateTtl(absl::Milliseconds(3)),
              StatusIsWith(absl::StatusCode::kInvalidArgument, "[10ms, 720h]"));
  EXPECT_THAT(ValidateTtl(kMinLeaseTtl), IsOk());
}

}  // namespace
}  // namespace dlock
