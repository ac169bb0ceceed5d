// dlock built against this workspace's own @com_google_absl: every target of
// that Abseil carries CONSUMER_OWN_ABSL, and this test reaches Abseil only
// through dlock's targets. Then a lock round trip on dlock's fake.
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "gtest/gtest.h"

#ifndef CONSUMER_OWN_ABSL
#error "dlock was not built against this workspace's @com_google_absl"
#endif

namespace {

TEST(OwnAbslTest, DlockUsesTheConsumersAbseilAndLocks) {
  EXPECT_EQ(CONSUMER_OWN_ABSL, 1);
  dlock::ManualEventLoop loop;
  dlock::FakeRedis redis(&loop);
  dlock::FakeTransport conn(&loop, &redis);
  dlock::SimpleLock lock(&loop, &conn);
  dlock::AcquireOptions o;
  o.ttl = absl::Seconds(5);
  absl::StatusOr<dlock::Lease> got = absl::UnknownError("no callback");
  auto h = lock.Acquire("own-absl", o, [&](absl::StatusOr<dlock::Lease> l) { got = l; });
  ASSERT_TRUE(h.ok()) << h.status();
  loop.RunUntilIdle();
  ASSERT_TRUE(got.ok()) << got.status();
  absl::Status released = absl::UnknownError("no callback");
  ASSERT_TRUE(lock.Release(*got, [&](absl::Status s) { released = s; }).ok());
  loop.RunUntilIdle();
  EXPECT_TRUE(released.ok()) << released;
}

}  // namespace
