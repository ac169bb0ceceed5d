// FairLock on a real redis-server (its scripts run on Redis's Lua, its
// notifications over real pub/sub): FIFO across separate connections, one
// waiter woken per release, a dead waiter's entry skipped after its expiry.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/keys.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/tests/env/uv_server_test.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using Result = std::shared_ptr<absl::StatusOr<Lease>>;

class FairLockRealTest : public test_support::UvServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(UvServerTest::SetUp());
    ASSERT_TRUE(server_->Command(TrustDataSetCommand(KeyScheme())).ok());
  }

  void TearDown() override {
    locks_.clear();
    UvServerTest::TearDown();
  }

  // A separate client: its own connection and FairLock.
  FairLock& NewClient(absl::Duration queue_ttl) {
    Transport* conn = uv_.Hiredis(server_->port());
    FairLockOptions o;
    o.queue_ttl = queue_ttl;
    locks_.push_back(std::make_unique<FairLock>(uv_.loop(), conn, o));
    return *locks_.back();
  }

  Result Start(FairLock& lock, absl::Duration wait) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    AcquireOptions o;
    o.ttl = absl::Seconds(30);
    o.wait = wait;
    EXPECT_THAT(lock.Acquire("r", o, [out](absl::StatusOr<Lease> r) { *out = std::move(r); }),
                IsOk());
    return out;
  }

  static bool Pending(const Result& r) { return absl::IsUnknown(r->status()); }

  int64_t QueueLength() {
    absl::StatusOr<Reply> r = server_->Command({"HLEN", "dlock:{r}:queue"});
    return r.ok() && r->is_integer() ? r->integer : -1;
  }

  void Release(FairLock& lock, const Lease& lease) {
    bool done = false;
    ASSERT_THAT(lock.Release(lease, [&](absl::Status s) {
      EXPECT_THAT(s, IsOk());
      done = true;
    }), IsOk());
    ASSERT_TRUE(uv_.RunUntil([&] { return done; }, absl::Seconds(10)));
  }

  std::vector<std::unique_ptr<FairLock>> locks_;
};

TEST_F(FairLockRealTest, SeparateClientsAreServedInArrivalOrderOneWakeUpPerRelease) {
  // queue_ttl 60 s: no refresh runs during the test, so every attempt after
  // the first is a wake-up.
  FairLock& holder = NewClient(absl::Seconds(60));
  std::vector<FairLock*> waiters;
  for (int i = 0; i < 3; ++i) waiters.push_back(&NewClient(absl::Seconds(60)));
  Result h = Start(holder, absl::ZeroDuration());
  ASSERT_TRUE(uv_.RunUntil([&] { return !Pending(h); }, absl::Seconds(10)));
  ASSERT_THAT(*h, IsOk());
  std::vector<Result> results;
  for (size_t i = 0; i < waiters.size(); ++i) {
    results.push_back(Start(*waiters[i], absl::Seconds(30)));
    // Queued (and subscribed: it re-attempts once the SUBSCRIBE is
    // confirmed, which also puts it in the queue) before the next arrives.
    ASSERT_TRUE(uv_.RunUntil([&] { return QueueLength() == static_cast<int64_t>(i) + 2; },
                             absl::Seconds(10)));
    uv_.RunFor(absl::Milliseconds(20));
  }
  Lease lease = **h;
  FairLock* owner = &holder;
  for (size_t i = 0; i < waiters.size(); ++i) {
    std::vector<int64_t> before;
    for (FairLock* w : waiters) before.push_back(w->attempts());
    Release(*owner, lease);
    ASSERT_TRUE(uv_.RunUntil([&] { return !Pending(results[i]); }, absl::Seconds(10)));
    ASSERT_THAT(*results[i], IsOk()) << "waiter " << i;
    uv_.RunFor(absl::Milliseconds(50));  // a stray wake-up would show by now
    for (size_t j = 0; j < waiters.size(); ++j) {
      EXPECT_EQ(waiters[j]->attempts(), before[j] + (j == i ? 1 : 0))
          << "release " << i << ", waiter " << j;
      if (j > i) EXPECT_TRUE(Pending(results[j])) << "release " << i << ", waiter " << j;
    }
    lease = **results[i];
    owner = waiters[i];
  }
  Release(*owner, lease);
  EXPECT_EQ(QueueLength(), 0);
}

TEST_F(FairLockRealTest, ADeadWaitersEntryIsSkippedOnceItExpires) {
  FairLock& live = NewClient(absl::Milliseconds(300));
  // A waiter that died at the head of the queue: ticket 0, expiring 1.5 s
  // from now on the server's clock.
  absl::StatusOr<Reply> t = server_->Command({"TIME"});
  ASSERT_TRUE(t.ok() && t->is_array());
  const int64_t now_ms = std::stoll(t->elements[0].str) * 1000 +
                         std::stoll(t->elements[1].str) / 1000;
  ASSERT_TRUE(server_
                  ->Command({"HSET", "dlock:{r}:queue", "deadbeef:0",
                             absl::StrCat("0:", now_ms + 1500)})
                  .ok());
  Result r = Start(live, absl::Seconds(30));
  uv_.RunFor(absl::Milliseconds(700));
  EXPECT_TRUE(Pending(r)) << "took the lock while a live-looking waiter was ahead";
  ASSERT_TRUE(uv_.RunUntil([&] { return !Pending(r); }, absl::Seconds(10)));
  ASSERT_THAT(*r, IsOk());
  Release(live, **r);
  EXPECT_EQ(QueueLength(), 0);
}

}  // namespace
}  // namespace dlock
