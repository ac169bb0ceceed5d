// The issue-16 primitives on a real 3 + 3 Redis Cluster through
// ClusterTransport (ClusterEnv, tests/env/cluster_env.h: one cluster for the whole
// binary): the semaphore behaviour suite (lock/semaphore_behavior_suite.h)
// and the primitive suite (lock/primitive_behavior_suite.h: the
// ReadWriteLock's writer and reader, FairLock, and ResourceSetLock of one
// and of three resources), unchanged. Every primitive keeps a resource's
// keys in that resource's slot (keys.h), so each script runs on one node; a
// resource set spans slots (its members "R/1".."R/3" hash to different
// slots, TheSuitesSetsSpanSeveralSlots), which works because MultiLock takes each member with its own
// script, one resource at a time, never one script over several slots.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "dlock/lock/primitive_behavior_suite.h"
#include "dlock/lock/semaphore_behavior_suite.h"
#include "dlock/tests/env/cluster_env.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

using test_support::ClusterEnv;

// The premise of the resource-set cases above: the members of each set the
// suite takes are spread over more than one slot (a set across slots works).
TEST(ClusterResourceSetTest, TheSuitesSetsSpanSeveralSlots) {
  KeyScheme keys;
  for (const char* resource : {"r", "orders/42", "fenced", "stock"}) {
    std::set<int> slots;
    for (const std::string& m : test_support::ResourceSetKind<3>::Members(resource)) {
      slots.insert(KeySlot(keys.LockKey(m)));
    }
    EXPECT_GE(slots.size(), 2u) << resource;
  }
}

}  // namespace

namespace test_support {
// The lock suite itself runs over the cluster in lock_behavior_cluster_test
// (a binary of its own, so the two share the machine's cores).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LockBehaviorTest);
using ClusterEnvs = ::testing::Types<ClusterEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, SemaphoreBehaviorTest, ClusterEnvs);
using PrimitiveClusterCases = ::testing::Types<
    PrimitiveCase<ClusterEnv, WriterKind>, PrimitiveCase<ClusterEnv, ReaderKind>,
    PrimitiveCase<ClusterEnv, FairKind>, PrimitiveCase<ClusterEnv, ResourceSetKind<1>>,
    PrimitiveCase<ClusterEnv, ResourceSetKind<3>>>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, PrimitiveBehaviorTest, PrimitiveClusterCases);
}  // namespace test_support
}  // namespace dlock
