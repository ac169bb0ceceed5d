// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real Sentinel deployment (SentinelDeployment: a master, 2 replicas, 3
// sentinels) through SentinelTransport, unchanged (SentinelEnv,
// tests/env/sentinel_env.h). One deployment per test process; each test starts from a master holding only the trusted data-set
// marker. Also: the watchdog renewing leases through SentinelTransport.
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/tests/env/sentinel_env.h"
#include "dlock/watchdog/renewal_check.h"

namespace dlock {
namespace {

using test_support::SentinelEnv;

// The watchdog keeps leases alive past their ttl through SentinelTransport,
// and stops at release.
TEST(SentinelWatchdogTest, RenewsLeasesPastTheirTtl) {
  SentinelEnv env;
  test_support::ExpectWatchdogKeepsLeases(env, env.NewClient(), 10);
}

}  // namespace

namespace test_support {
using SentinelEnvs = ::testing::Types<SentinelEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisSentinel, LockBehaviorTest, SentinelEnvs);
}  // namespace test_support
}  // namespace dlock
