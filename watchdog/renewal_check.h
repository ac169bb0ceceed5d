// This header defines `ExpectWatchdogKeepsLeases`, a check any deployment's
// tests run to see the watchdog renew leases over their transport: it takes
// `count` leases of a short ttl through a SimpleLock on `transport`, watches
// them, lets four ttls pass, expects every key still held with its token and
// no lease reported lost, then releases every watch and expects every key
// gone. `Env` is a lock behaviour suite environment (loop(), RunUntil,
// RunFor, Server; see lock/lock_behavior_suite.h). The Sentinel and Cluster
// tests use it; a new deployment's test can too.
#ifndef DLOCK_WATCHDOG_RENEWAL_CHECK_H_
#define DLOCK_WATCHDOG_RENEWAL_CHECK_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace test_support {

template <typename Env>
void ExpectWatchdogKeepsLeases(Env& env, Transport* transport, int count) {
  ASSERT_NE(transport, nullptr);
  SimpleLock lock(env.loop(), transport);
  Watchdog dog(env.loop(), &lock);
  std::vector<WatchHandle> watches;
  std::vector<Lease> leases;
  int lost = 0;
  for (int i = 0; i < count; ++i) {
    bool done = false;
    AcquireOptions o;
    o.ttl = absl::Milliseconds(300);
    auto h = lock.Acquire(absl::StrCat("watched/", i), o, [&](absl::StatusOr<Lease> l) {
      ASSERT_TRUE(l.ok()) << l.status();
      leases.push_back(*l);
      done = true;
    });
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE(env.RunUntil([&] { return done; }, absl::Seconds(5)));
    WatchOptions w;
    w.on_lost = [&lost](absl::Status) { ++lost; };
    auto watch = dog.Watch(leases.back(), std::move(w));
    ASSERT_TRUE(watch.ok()) << watch.status();
    watches.push_back(*std::move(watch));
  }
  env.RunFor(absl::Milliseconds(1200));  // four ttls
  EXPECT_EQ(lost, 0);
  KeyScheme keys;
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"GET", keys.LockKey(l.resource)}), Reply::String(l.token));
  }
  int released = 0;
  for (WatchHandle& w : watches) {
    ASSERT_TRUE(w.Release([&](absl::Status s) {
                   EXPECT_TRUE(s.ok()) << s;
                   ++released;
                 }).ok());
  }
  ASSERT_TRUE(env.RunUntil([&] { return released == count; }, absl::Seconds(5)));
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"EXISTS", keys.LockKey(l.resource)}), Reply::Integer(0));
  }
}

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_WATCHDOG_RENEWAL_CHECK_H_
