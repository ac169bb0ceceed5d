// The lock behaviour suite (lock/lock_behavior_suite.h) on a real
// redis-server: HiredisTransport connections on a UvEventLoop, one private
// server per test on a free loopback port (StandaloneEnv,
// tests/env/standalone_env.h). The same tests run on the fake in
// lock/lock_behavior_fake_test.cc.
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/primitive_behavior_suite.h"
#include "dlock/lock/semaphore_behavior_suite.h"
#include "dlock/tests/env/standalone_env.h"

namespace dlock {
namespace test_support {
using RealEnvs = ::testing::Types<StandaloneEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RealRedis, LockBehaviorTest, RealEnvs);
INSTANTIATE_TYPED_TEST_SUITE_P(RealRedis, SemaphoreBehaviorTest, RealEnvs);
using PrimitiveRealCases = ::testing::Types<
    PrimitiveCase<StandaloneEnv, WriterKind>, PrimitiveCase<StandaloneEnv, ReaderKind>,
    PrimitiveCase<StandaloneEnv, FairKind>, PrimitiveCase<StandaloneEnv, ResourceSetKind<1>>,
    PrimitiveCase<StandaloneEnv, ResourceSetKind<3>>>;
INSTANTIATE_TYPED_TEST_SUITE_P(RealRedis, PrimitiveBehaviorTest, PrimitiveRealCases);
}  // namespace test_support
}  // namespace dlock
