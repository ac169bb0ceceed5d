// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real 3 + 3 Redis Cluster through ClusterTransport, unchanged (ClusterEnv,
// tests/env/cluster_env.h: one cluster per test process). Also: the watchdog renewing
// leases on many slots.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/cluster_env.h"
#include "dlock/watchdog/renewal_check.h"

namespace dlock {
namespace {

using test_support::ClusterEnv;

// The watchdog keeps leases on many slots alive past their ttl, over the
// cluster, and stops at release.
TEST(ClusterWatchdogTest, RenewsLeasesOnEverySlot) {
  ClusterEnv env;
  test_support::ExpectWatchdogKeepsLeases(env, env.NewClient(), 30);
}

}  // namespace

namespace test_support {
using ClusterEnvs = ::testing::Types<ClusterEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, LockBehaviorTest, ClusterEnvs);
}  // namespace test_support
}  // namespace dlock
