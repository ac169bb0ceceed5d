// The lock behaviour suite (lock/lock_behavior_suite.h) over TLS: TlsTransport
// connections (rediss://) on a UvEventLoop to a private redis-server with a
// throw-away CA, one per test (TlsEnv, tests/env/tls_env.h). The same tests
// run over plain TCP in lock_behavior_real_test.cc and on the fake in
// lock/lock_behavior_fake_test.cc.
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/tests/env/tls_env.h"

namespace dlock {
namespace test_support {
using TlsEnvs = ::testing::Types<TlsEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(TlsRedis, LockBehaviorTest, TlsEnvs);
}  // namespace test_support
}  // namespace dlock
