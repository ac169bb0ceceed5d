// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real 3 + 3 Redis Cluster through ClusterTransport, unchanged (ClusterEnv,
// tests/env/cluster_env.h: one cluster per test process). Also: the watchdog renewing
// leases on many slots, and what 1,000 resources locked and released leave
// (issue 23: at most the marker and the fence mark per slot).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/cluster_env.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/watchdog/renewal_check.h"

namespace dlock {
namespace {

using test_support::ClusterEnv;
using test_support::IsOk;

// The watchdog keeps leases on many slots alive past their ttl, over the
// cluster, and stops at release.
TEST(ClusterWatchdogTest, RenewsLeasesOnEverySlot) {
  ClusterEnv env;
  test_support::ExpectWatchdogKeepsLeases(env, env.NewClient(), 30);
}

// Issue 23, goal 1 on the 3-master cluster: 1,000 resources locked and
// released leave, in each slot, at most its data-set marker and its fence
// mark -- nothing per resource -- and fences rise on each slot.
TEST(ClusterFenceMarkTest, AThousandResourcesLeaveAtMostTwoKeysPerSlot) {
  ClusterEnv env;
  ASSERT_NE(env.deployment().cluster(), nullptr);
  SimpleLock lock(env.loop(), env.NewClient());
  KeyScheme keys;
  keys.per_slot_data_set = true;
  std::map<int, int64_t> last_fence;  // slot -> last fence issued there
  for (int i = 0; i < 1000; ++i) {
    const std::string r = absl::StrCat("order:", i);
    bool done = false;
    absl::StatusOr<Lease> lease = absl::UnknownError("not run");
    AcquireOptions o;
    o.ttl = absl::Seconds(30);
    absl::StatusOr<AcquireHandle> handle = lock.Acquire(r, o, [&](absl::StatusOr<Lease> l) {
      lease = std::move(l);
      done = true;
    });
    ASSERT_THAT(handle, IsOk());
    ASSERT_TRUE(env.RunUntil([&] { return done; }, absl::Seconds(30))) << r;
    ASSERT_THAT(lease, IsOk()) << r;
    const int slot = static_cast<int>(KeySlot(keys.LockKey(r)));
    auto it = last_fence.find(slot);
    if (it != last_fence.end()) EXPECT_GT(lease->fence, it->second) << r;
    last_fence[slot] = lease->fence;
    done = false;
    absl::Status released = absl::UnknownError("not run");
    ASSERT_THAT(lock.Release(*lease,
                             [&](absl::Status s) {
                               released = std::move(s);
                               done = true;
                             }),
                IsOk());
    ASSERT_TRUE(env.RunUntil([&] { return done; }, absl::Seconds(30))) << r;
    ASSERT_THAT(released, IsOk()) << r;
  }
  // Every key left on every master is a slot's marker or fence mark, and no
  // slot holds more than those two.
  int64_t marks = 0;
  for (int m : env.deployment().masters()) {
    auto all = env.deployment().cluster()->Command(m, {"KEYS", "*"});
    ASSERT_TRUE(all.ok()) << all.status();
    std::map<int, int> per_slot;
    for (const Reply& k : all->elements) {
      const bool marker = absl::StartsWith(k.str, test_support::kClusterMarkerPrefix);
      const bool mark = absl::StartsWith(k.str, "dlock:fence-hwm:{");
      EXPECT_TRUE(marker || mark) << k.str;
      marks += mark ? 1 : 0;
      ++per_slot[static_cast<int>(KeySlot(k.str))];
    }
    for (const auto& [slot, n] : per_slot) EXPECT_LE(n, 2) << "slot " << slot;
  }
  EXPECT_EQ(marks, static_cast<int64_t>(last_fence.size()));
}

}  // namespace

namespace test_support {
using ClusterEnvs = ::testing::Types<ClusterEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, LockBehaviorTest, ClusterEnvs);
}  // namespace test_support
}  // namespace dlock
