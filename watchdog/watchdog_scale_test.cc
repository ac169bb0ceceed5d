// 10,000 leases watched by one Watchdog on one virtual-time loop, renewed
// over FakeRedis through one SimpleLock connection: none is lost, all share
// one loop timer, and renewals due together go out together.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;

class WatchdogScaleTest : public ::testing::Test {
 protected:
  WatchdogScaleTest() : server_(&loop_) {}

  FakeTransport* NewClient() {
    clients_.push_back(std::make_unique<FakeTransport>(&loop_, &server_));
    clients_.back()->SetLatency(absl::Milliseconds(1));
    return clients_.back().get();
  }
  void Advance(absl::Duration d) { loop_.AdvanceTime(d); }
  std::optional<std::string> Holder(const std::string& resource) {
    return server_.GetString(keys_.LockKey(resource));
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<FakeTransport>> clients_;
  KeyScheme keys_;
};

TEST_F(WatchdogScaleTest, TenThousandLeasesAreRenewedAndNoneIsLost) {
  FakeTransport* conn = NewClient();
  SimpleLock holder(&loop_, conn);
  Watchdog watchdog(&loop_, &holder);
  const absl::Duration ttl = absl::Seconds(10);
  constexpr int kLeases = 10000;
  // Acquire them all (pipelined, in batches of 500 per millisecond).
  std::vector<Lease> leases;
  leases.reserve(kLeases);
  int failed = 0;
  for (int i = 0; i < kLeases; ++i) {
    AcquireOptions o;
    o.ttl = ttl;
    ASSERT_THAT(holder.Acquire(absl::StrCat("job/", i), o,
                               [&](absl::StatusOr<Lease> r) {
                                 if (r.ok()) leases.push_back(*std::move(r));
                                 else ++failed;
                               }),
                IsOk());
    if (i % 500 == 499) Advance(absl::Milliseconds(1));
  }
  Advance(absl::Milliseconds(10));
  ASSERT_EQ(failed, 0);
  ASSERT_EQ(leases.size(), static_cast<size_t>(kLeases));

  int lost = 0;
  std::vector<WatchHandle> handles;
  handles.reserve(kLeases);
  for (const Lease& lease : leases) {
    WatchOptions options;
    options.on_lost = [&lost](absl::Status) { ++lost; };
    absl::StatusOr<WatchHandle> h = watchdog.Watch(lease, std::move(options));
    ASSERT_THAT(h, IsOk());
    handles.push_back(*std::move(h));
  }
  EXPECT_EQ(watchdog.watched(), static_cast<size_t>(kLeases));
  // One loop timer for all of them (plus nothing else pending).
  EXPECT_EQ(loop_.pending(), 1u);

  conn->ClearSent();
  server_.ClearLog();
  Advance(2 * ttl);
  EXPECT_EQ(lost, 0);
  // a lock key per lease, and the server's data-set marker and fence mark
  EXPECT_EQ(server_.DbSize(), static_cast<size_t>(kLeases + 2));
  for (int i = 0; i < kLeases; i += 997) {
    EXPECT_EQ(Holder(absl::StrCat("job/", i)), leases[i].token);
    EXPECT_TRUE(handles[i].IsValid());
  }
  // About 3 renewals per ttl each (5 or 6 in 2 ttl)...
  int64_t extends = 0;
  for (const auto& sent : conn->sent()) {
    extends += sent.size() >= 2 && sent[0] == "EVALSHA" && sent[1] == ExtendScript().sha1();
  }
  EXPECT_GE(extends, 5 * kLeases);
  EXPECT_LE(extends, 7 * kLeases);
  // ...sent in a few large batches (the acquisitions came in 20 batches
  // 1 ms apart; the batch window is 5 ms), not one loop turn per lease.
  std::vector<int64_t> times;
  for (const auto& entry : server_.log()) {
    if (entry.from_script && !entry.argv.empty() &&
        absl::AsciiStrToUpper(entry.argv[0]) == "PEXPIRE") {
      times.push_back(entry.time_ms);
    }
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  EXPECT_LE(times.size(), 6u * 10u);
}

}  // namespace
}  // namespace dlock
