// redisson#2515 as a probe (issue 22, item 5): after a Sentinel failover
// the watchdog stopped renewing and the lock expired under its holder. Here
// a real deployment (1 master, 2 replicas, 3 sentinels on loopback) fails
// over twice (SENTINEL FAILOVER, then kill -9 of the master) while a lease
// is watched through a redis-sentinel:// transport: the watchdog follows
// each new master and keeps renewing there; the lease is never lost and
// nobody else gets it.
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/probes/renewal_probe.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/transport/uv/uv_transport.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::SentinelDeployment;
using ::dlock::test_support::StatusIs;

TEST(SentinelProbeTest, Redisson2515_RenewalContinuesAfterSentinelFailovers) {
  absl::StatusOr<std::unique_ptr<SentinelDeployment>> d = SentinelDeployment::Start();
  ASSERT_THAT(d, IsOk());
  SentinelDeployment& deployment = **d;
  dlock::test_support::UvTestLoop uv;
  {
    UvEventLoop loop(uv.get());
    absl::StatusOr<RedisUrl> url = ParseRedisUrl(deployment.url());
    ASSERT_THAT(url, IsOk());
    std::vector<std::unique_ptr<UvTransport>> conns;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<UvTransport>> t =
          UvTransport::Create(uv.get(), TransportOptionsForUrl(*url));
      ASSERT_THAT(t, IsOk());
      ASSERT_THAT(uv.ConnectAndWait(**t, absl::Seconds(20)), IsOk());
      conns.push_back(*std::move(t));
    }
    // The grant is acknowledged by both replicas, so the promoted one has it.
    SimpleLockOptions acked;
    acked.replica_ack = ReplicaAck(2);
    acked.replica_ack.timeout = absl::Milliseconds(500);
    SimpleLock granting(&loop, conns[0].get(), acked);
    SimpleLock holder(&loop, conns[0].get());
    SimpleLock rival(&loop, conns[1].get());
    KeyScheme keys;

    auto acquire = [&](SimpleLock& lock, absl::Duration ttl) {
      std::optional<absl::StatusOr<Lease>> out;
      AcquireOptions o;
      o.ttl = ttl;
      EXPECT_THAT(lock.Acquire("job", o, [&](absl::StatusOr<Lease> r) { out = std::move(r); }),
                  IsOk());
      uv.RunUntil([&] { return out.has_value(); }, absl::Seconds(20));
      return out.value_or(absl::InternalError("acquire never called back"));
    };
    const absl::Duration ttl = absl::Seconds(10);
    absl::StatusOr<Lease> lease = acquire(granting, ttl);
    ASSERT_THAT(lease, IsOk());

    test_support::RenewalCounter renewals;
    Watchdog dog(&loop, &holder, test_support::CountRenewals(&renewals));
    bool lost = false;
    absl::Status why;
    absl::StatusOr<WatchHandle> watch =
        dog.Watch(*lease, test_support::RecordLoss(&lost, &why, absl::Milliseconds(500)));
    ASSERT_THAT(watch, IsOk());
    ASSERT_TRUE(uv.RunUntil([&] { return lost || renewals.ok >= 1; }, absl::Seconds(20)));
    ASSERT_FALSE(lost) << why;

    // Two master changes: a graceful SENTINEL FAILOVER, then a kill -9 of
    // the master (renewals fail until the sentinels promote a replica).
    for (bool kill : {false, true}) {
      SCOPED_TRACE(kill ? "kill -9 of the master" : "SENTINEL FAILOVER");
      absl::StatusOr<int> old_master = deployment.MasterIndex();
      ASSERT_THAT(old_master, IsOk());
      if (kill) ASSERT_THAT(deployment.data(*old_master).Kill(), IsOk());
      // The sentinels work on another thread while the loop keeps renewing.
      auto changed = std::async(std::launch::async, [&]() -> absl::StatusOr<int> {
        if (kill) return deployment.WaitForNewMaster(*old_master);
        absl::Status s = deployment.Failover();
        if (!s.ok()) return s;
        return deployment.MasterIndex();
      });
      uv.RunUntil(
          [&] {
            return lost ||
                   changed.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
          },
          absl::Seconds(60));
      ASSERT_FALSE(lost) << "lost during the master change: " << why;
      absl::StatusOr<int> new_master = changed.get();
      ASSERT_THAT(new_master, IsOk());
      ASSERT_NE(*new_master, *old_master);
      const std::string want = absl::StrCat("127.0.0.1:", deployment.data(*new_master).port());
      ASSERT_TRUE(uv.RunUntil(
          [&] {
            return lost ||
                   (conns[0]->sentinel()->master_address() == want && conns[0]->connected());
          },
          absl::Seconds(20)))
          << conns[0]->sentinel()->last_error();

      // Renewals go on on the new master.
      const int after = renewals.ok;
      EXPECT_TRUE(
          uv.RunUntil([&] { return lost || renewals.ok >= after + 3; }, absl::Seconds(20)))
          << "renewal stopped after the master changed";
      ASSERT_FALSE(lost) << why;
      EXPECT_TRUE(watch->IsValid());
      absl::StatusOr<Reply> value =
          deployment.data(*new_master).Command({"GET", keys.LockKey("job")});
      ASSERT_THAT(value, IsOk());
      EXPECT_EQ(*value, Reply::String(lease->token));
      absl::StatusOr<Reply> pttl =
          deployment.data(*new_master).Command({"PTTL", keys.LockKey("job")});
      ASSERT_THAT(pttl, IsOk());
      ASSERT_TRUE(pttl->is_integer());
      EXPECT_GT(pttl->integer, absl::ToInt64Milliseconds(ttl) - 2000);  // renewed just now
    }
    EXPECT_THAT(acquire(rival, absl::Seconds(1)), StatusIs(absl::StatusCode::kAborted));

    bool released = false;
    ASSERT_THAT(watch->Release([&](absl::Status s) {
      EXPECT_THAT(s, IsOk());
      released = true;
    }),
                IsOk());
    ASSERT_TRUE(uv.RunUntil([&] { return released; }, absl::Seconds(20)));
    for (auto& c : conns) c->Close();
  }
  EXPECT_EQ(uv.Close(), 0);
}

}  // namespace
}  // namespace dlock
