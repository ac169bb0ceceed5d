// Both workspaces' lock/ and transport/ headers in one translation unit:
// each include resolves to the intended file (a mix-up would not compile).
#include <string>

#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/transport.h"
#include "gtest/gtest.h"
#include "lock/lock.h"
#include "transport/transport.h"

namespace consumer {
namespace {

TEST(HeadersTest, ConsumerAndDlockHeadersCoexist) {
  dlock::Lease lease;
  lease.resource = OrderResource(42);
  lease.token = "0123456789abcdef0123456789abcdef";
  lease.fence = 7;
  lease.ttl = absl::Seconds(30);
  EXPECT_EQ(Describe(lease), "order:42 fence=7 ttl=30s");
  EXPECT_EQ(ShippingLabel(Shipment{42, "rail"}), "order 42 via rail");
}

TEST(HeadersTest, DlockFakeLoopRunsInVirtualTime) {
  dlock::ManualEventLoop loop;
  dlock::EventLoop& as_interface = loop;
  bool ran = false;
  as_interface.RunAfter(absl::Seconds(5), [&ran] { ran = true; });
  loop.AdvanceTime(absl::Seconds(4));
  EXPECT_FALSE(ran);
  loop.AdvanceTime(absl::Seconds(1));
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace consumer
