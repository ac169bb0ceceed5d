// The Watchdog on a real redis-server: HiredisTransport connections on a
// UvEventLoop, one private server per test on a free loopback port. Waits
// are bounded runs of the real loop until an event (no sleeps).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/tests/env/uv_server_test.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class WatchdogRealTest : public test_support::UvServerTest {
 protected:
  HiredisTransport* NewClient() {
    HiredisTransportOptions options;
    options.port = server_->port();
    return uv_.Hiredis(options);
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, const std::string& resource,
                                   absl::Duration ttl) {
    AcquireOptions options;
    options.ttl = ttl;
    return uv_.Acquire(lock, resource, options);
  }

  Reply Server(std::vector<std::string> argv) {
    absl::StatusOr<Reply> r = server_->Command(std::move(argv));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  KeyScheme keys_;
};

TEST_F(WatchdogRealTest, HolderWithOneSecondTtlKeepsTheLockForFiveSeconds) {
  SimpleLock holder(uv_.loop(), NewClient());
  SimpleLock rival(uv_.loop(), NewClient());
  absl::StatusOr<Lease> lease = AcquireNow(holder, "job", absl::Seconds(1));
  ASSERT_THAT(lease, IsOk());

  Watchdog watchdog(uv_.loop(), &holder);
  bool lost = false;
  absl::Status why;
  WatchOptions options;
  options.on_lost = [&](absl::Status s) {
    lost = true;
    why = std::move(s);
  };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*lease, std::move(options));
  ASSERT_THAT(watch, IsOk());

  // Meanwhile another process tries to take it every 100 ms.
  int rival_wins = 0, rival_busy = 0;
  bool stop_rival = false, rival_inflight = false;
  TimerId rival_timer = 0;
  std::function<void()> try_take = [&] {
    rival_timer = 0;
    AcquireOptions o;
    o.ttl = absl::Seconds(1);
    rival_inflight = true;
    ASSERT_THAT(rival.Acquire("job", o, [&](absl::StatusOr<Lease> r) {
      rival_inflight = false;
      if (r.ok()) ++rival_wins;
      if (absl::IsAborted(r.status())) ++rival_busy;
      if (!stop_rival) {
        rival_timer = uv_.loop()->RunAfter(absl::Milliseconds(100), [&] { try_take(); });
      }
    }),
                IsOk());
  };
  try_take();

  const absl::Time start = uv_.loop()->Now();
  uv_.RunUntil([&] { return lost || uv_.loop()->Now() >= start + absl::Seconds(5); },
               absl::Seconds(20));
  EXPECT_GE(uv_.loop()->Now(), start + absl::Seconds(5));
  EXPECT_FALSE(lost) << why;
  EXPECT_TRUE(watch->IsValid());
  EXPECT_TRUE(watch->active());
  EXPECT_EQ(rival_wins, 0);
  EXPECT_GE(rival_busy, 20);
  EXPECT_EQ(Server({"GET", keys_.LockKey("job")}), Reply::String(lease->token));
  EXPECT_GT(watch->lease().deadline, lease->deadline + absl::Seconds(4));

  stop_rival = true;
  if (rival_timer != 0) uv_.loop()->Cancel(rival_timer);
  ASSERT_TRUE(uv_.RunUntil([&] { return !rival_inflight; }, absl::Seconds(10)));
  bool released = false;
  absl::Status release_status;
  ASSERT_THAT(watch->Release([&](absl::Status s) {
    release_status = s;
    released = true;
  }),
              IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return released; }, absl::Seconds(10)));
  EXPECT_THAT(release_status, IsOk());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("job")}), Reply::Integer(0));
  EXPECT_THAT(AcquireNow(rival, "job", absl::Seconds(1)), IsOk());
  EXPECT_FALSE(lost);
}

TEST_F(WatchdogRealTest, StoppedServerCausesOnLostBeforeTheTtlIsUp) {
  // The promise holds when the loop wakes for on_lost within the drift
  // allowance; make that allowance cover the timer wake-up latency of a
  // sanitizer build on a loaded 2-core CI machine (45 tests in parallel).
  SimpleLockOptions lock_options;
  lock_options.drift_constant = absl::Milliseconds(200);
  const absl::Duration ttl = absl::Seconds(1);
  const absl::Duration drift =
      DriftAllowance(ttl, lock_options.drift_factor, lock_options.drift_constant);
  SimpleLock holder(uv_.loop(), NewClient(), lock_options);
  absl::StatusOr<Lease> lease = AcquireNow(holder, "job", ttl);
  ASSERT_THAT(lease, IsOk());

  Watchdog watchdog(uv_.loop(), &holder);
  bool lost = false;
  absl::Status why;
  absl::Time lost_at;
  WatchOptions options;
  options.on_lost = [&](absl::Status s) {
    lost = true;
    why = std::move(s);
    lost_at = uv_.loop()->Now();
  };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*lease, std::move(options));
  ASSERT_THAT(watch, IsOk());

  // A few renewals first.
  const absl::Time start = uv_.loop()->Now();
  uv_.RunUntil([&] { return lost || uv_.loop()->Now() >= start + absl::Milliseconds(1500); },
               absl::Seconds(10));
  ASSERT_FALSE(lost) << why;
  ASSERT_GT(watch->lease().deadline, lease->deadline);

  // SIGSTOP: the server answers nothing, but its key still expires on time.
  ASSERT_THAT(server_->Pause(), IsOk());
  const absl::Time paused_at = uv_.loop()->Now();
  ASSERT_TRUE(uv_.RunUntil([&] { return lost; }, absl::Seconds(10)));
  EXPECT_THAT(why, StatusIs(absl::StatusCode::kDeadlineExceeded));
  // The last successful renewal was sent at deadline - ttl + drift; the
  // server set the key's TTL no earlier, so it expires no earlier than
  // send + ttl. on_lost came strictly before that, and not before the
  // local deadline.
  const absl::Time last_send = watch->lease().deadline - ttl + drift;
  EXPECT_LE(last_send, paused_at);
  EXPECT_LT(lost_at, last_send + ttl);
  EXPECT_GE(lost_at, watch->lease().deadline);
  EXPECT_FALSE(watch->IsValid());
  EXPECT_FALSE(watch->active());

  // Afterwards: the server comes back; nothing resurrects the watch.
  ASSERT_THAT(server_->Resume(), IsOk());
  uv_.RunFor(absl::Milliseconds(300));
  EXPECT_TRUE(watch->lost());
  EXPECT_FALSE(watch->IsValid());
}

}  // namespace
}  // namespace dlock
