// Issue 11: RedLock checks lease TTLs with the shared ValidateLeaseTtl
// (lock_commands.h), like every other policy: below kMinLeaseTtl is
// kInvalidArgument from the call, naming the accepted range; the minimum
// itself is a working lease.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

TEST(RedLockTtlTest, BelowTheMinimumIsRejectedByTheCallNamingTheRange) {
  ManualEventLoop loop;
  std::vector<std::unique_ptr<FakeRedis>> servers;
  std::vector<std::unique_ptr<FakeTransport>> conns;
  std::vector<Transport*> raw;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<FakeRedis>(&loop));
    servers.back()->Execute(TrustDataSetCommand(KeyScheme{}));  // never used: no window
    conns.push_back(std::make_unique<FakeTransport>(&loop, servers.back().get()));
    raw.push_back(conns.back().get());
  }
  RedLockOptions options;
  options.retry_count = 0;
  options.server_timeout = absl::Milliseconds(4);
  absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(&loop, raw, options);
  ASSERT_THAT(lock, IsOk());
  int ran = 0;
  auto cb = [&ran](absl::StatusOr<Lease>) { ++ran; };
  for (absl::Duration ttl : {absl::Milliseconds(1), absl::Milliseconds(3),
                             absl::Microseconds(9999)}) {
    AcquireOptions o;
    o.ttl = ttl;
    absl::StatusOr<AcquireHandle> h = (*lock)->Acquire("r", o, cb);
    EXPECT_THAT(h, StatusIs(absl::StatusCode::kInvalidArgument)) << ttl;
    EXPECT_TRUE(absl::StrContains(h.status().message(), "[10ms, 1m]")) << h.status();
  }
  Lease lease;
  lease.resource = "r";
  lease.token = "t";
  absl::Status s = (*lock)->Extend(lease, absl::Milliseconds(3), cb);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(absl::StrContains(s.message(), "[10ms, 1m]")) << s;
  loop.RunUntilIdle();
  EXPECT_EQ(ran, 0);
  for (auto& c : conns) EXPECT_EQ(c->sent().size(), 0u);

  // The minimum itself works (validity 10 - 2.1 ms on a zero-latency fake).
  AcquireOptions o;
  o.ttl = kMinLeaseTtl + absl::Microseconds(500);  // truncated to 10 ms
  absl::StatusOr<Lease> got = absl::UnknownError("pending");
  ASSERT_THAT((*lock)->Acquire("min", o, [&](absl::StatusOr<Lease> l) { got = std::move(l); }),
              IsOk());
  loop.RunUntilIdle();
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->ttl, kMinLeaseTtl);
  lock->reset();
  conns.clear();
}

}  // namespace
}  // namespace dlock
