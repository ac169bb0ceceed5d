// The consumer's unit test on dlock's in-memory fake: FakeRedis (which runs
// dlock's real Lua scripts) shared by two FakeTransport connections, as two
// processes would share a Redis server, all in virtual time.
#include "app/shipper.h"

#include <optional>

#include "dlock/lock/simple_lock.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lock/lock.h"

namespace consumer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ShipperTest : public ::testing::Test {
 protected:
  dlock::ManualEventLoop loop_;
  dlock::FakeRedis redis_{&loop_};
  dlock::FakeTransport conn_a_{&loop_, &redis_};
  dlock::FakeTransport conn_b_{&loop_, &redis_};
  dlock::SimpleLock lock_a_{&loop_, &conn_a_};
  dlock::SimpleLock lock_b_{&loop_, &conn_b_};
  Shipper a_{&lock_a_};
  Shipper b_{&lock_b_};
};

TEST_F(ShipperTest, ConcurrentShipmentsOfOneOrderShipOnce) {
  std::optional<absl::Status> ra, rb;
  a_.Ship({42, "rail"}, [&](absl::Status s) { ra = s; });
  b_.Ship({42, "road"}, [&](absl::Status s) { rb = s; });
  loop_.RunUntilIdle();
  ASSERT_TRUE(ra.has_value());
  ASSERT_TRUE(rb.has_value());
  EXPECT_TRUE(ra->ok()) << *ra;
  EXPECT_EQ(rb->code(), absl::StatusCode::kAborted) << *rb;
  EXPECT_THAT(a_.shipped(), ElementsAre(HasSubstr("order 42 via rail")));
  EXPECT_THAT(b_.shipped(), IsEmpty());
  // Released: the key is gone and the next shipment may proceed.
  EXPECT_FALSE(redis_.Exists("dlock:{order:42}"));
}

TEST_F(ShipperTest, HeldOrderIsRefusedUntilItsLeaseExpires) {
  ASSERT_EQ(redis_.Execute({"SET", "dlock:{order:7}", "someone", "PX", "5000"}).str, "OK");
  std::optional<absl::Status> r;
  a_.Ship({7, "air"}, [&](absl::Status s) { r = s; });
  loop_.RunUntilIdle();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code(), absl::StatusCode::kAborted) << *r;

  // The other holder's lease expires (Redis: strictly after its PX).
  loop_.AdvanceTime(absl::Seconds(5) + absl::Milliseconds(1));
  r.reset();
  a_.Ship({7, "air"}, [&](absl::Status s) { r = s; });
  loop_.RunUntilIdle();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok()) << *r;
  EXPECT_THAT(a_.shipped(), ElementsAre(HasSubstr("order 7 via air [order:7 fence=1")));
}

}  // namespace
}  // namespace consumer
