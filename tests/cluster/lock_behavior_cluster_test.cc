// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real 3 + 3 Redis Cluster through ClusterTransport, unchanged (ClusterEnv,
// cluster_env.h: one cluster per test process). Also: the watchdog renewing
// leases on many slots.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/cluster/cluster_env.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

using cluster_test::ClusterEnv;

// The watchdog keeps leases on many slots alive past their ttl, over the
// cluster, and stops at release.
TEST(ClusterWatchdogTest, RenewsLeasesOnEverySlot) {
  ClusterEnv env;
  Transport* t = env.NewClient();
  SimpleLock lock(env.loop(), t);
  Watchdog dog(env.loop(), &lock);
  std::vector<WatchHandle> watches;
  std::vector<Lease> leases;
  int lost = 0;
  for (int i = 0; i < 30; ++i) {
    bool done = false;
    AcquireOptions o;
    o.ttl = absl::Milliseconds(300);
    auto h = lock.Acquire(absl::StrCat("watched/", i), o, [&](absl::StatusOr<Lease> l) {
      ASSERT_TRUE(l.ok()) << l.status();
      leases.push_back(*l);
      done = true;
    });
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(env.RunUntil([&] { return done; }, absl::Seconds(5)));
    WatchOptions w;
    w.on_lost = [&lost](absl::Status) { ++lost; };
    auto watch = dog.Watch(leases.back(), std::move(w));
    ASSERT_TRUE(watch.ok()) << watch.status();
    watches.push_back(*std::move(watch));
  }
  env.RunFor(absl::Milliseconds(1200));  // four ttls
  EXPECT_EQ(lost, 0);
  KeyScheme keys;
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"GET", keys.LockKey(l.resource)}), Reply::String(l.token));
  }
  int released = 0;
  for (WatchHandle& w : watches) {
    ASSERT_TRUE(w.Release([&](absl::Status s) {
                   EXPECT_TRUE(s.ok()) << s;
                   ++released;
                 }).ok());
  }
  ASSERT_TRUE(env.RunUntil([&] { return released == 30; }, absl::Seconds(5)));
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"EXISTS", keys.LockKey(l.resource)}), Reply::Integer(0));
  }
}

}  // namespace

namespace testing {
using ClusterEnvs = ::testing::Types<cluster_test::ClusterEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, LockBehaviorTest, ClusterEnvs);
}  // namespace testing
}  // namespace dlock
