// BlockingClientOptions::fair: FakeTransports on a FakeRedis on a real loop
// thread. Threads of separate clients that queue one after another get the
// lock in that order; a TryLock does not barge past them; the option's
// checks.
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/fake_server_test_base.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class FairClientFakeTest : public test_support::FakeServerTest<UvLoopThread> {
 protected:
  absl::StatusOr<std::unique_ptr<BlockingClient>> Create(BlockingClientOptions o, int n = 1) {
    return BlockingClient::Create(&thread_, Connections(n), std::move(o));
  }

  // Live waiters in the resource's queue (the hash minus its "#next").
  int64_t Queued(const std::string& resource) {
    int64_t n = 0;
    EXPECT_THAT(OnLoop([&] {
      Reply r = server_->Execute({"HLEN", absl::StrCat("dlock:{", resource, "}:queue")});
      n = r.is_integer() && r.integer > 0 ? r.integer - 1 : 0;
    }), IsOk());
    return n;
  }
};

BlockingClientOptions Fair() {
  BlockingClientOptions o;
  o.fair = true;
  o.auto_renew = false;
  return o;
}

TEST_F(FairClientFakeTest, ThreadsOfSeparateClientsGetTheLockInTheOrderTheyAsked) {
  constexpr int kWaiters = 3;
  std::vector<std::unique_ptr<BlockingClient>> clients;
  for (int i = 0; i <= kWaiters; ++i) {
    auto c = Create(Fair());
    ASSERT_THAT(c.status(), IsOk());
    clients.push_back(*std::move(c));
  }
  absl::StatusOr<LockGuard> held = clients[0]->Lock("r", absl::Seconds(30), absl::Seconds(5));
  ASSERT_THAT(held.status(), IsOk());

  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 1; i <= kWaiters; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<LockGuard> g = clients[i]->Lock("r", absl::Seconds(30), absl::Seconds(20));
      ASSERT_THAT(g.status(), IsOk());
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }
      EXPECT_THAT(g->Unlock(), IsOk());
    });
    // The next thread asks only once this one is queued.
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (Queued("r") < i && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_EQ(Queued("r"), i);
  }
  // A TryLock of a fifth client is refused: the queue goes first.
  auto late = Create(Fair());
  ASSERT_THAT(late.status(), IsOk());
  EXPECT_THAT((*late)->TryLock("r", absl::Seconds(30)).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(held->Unlock(), IsOk());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(FairClientFakeTest, FairNeedsOneServerAndIsNotReentrant) {
  EXPECT_THAT(Create(Fair(), /*n=*/3).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  BlockingClientOptions o = Fair();
  o.reentrant = true;
  EXPECT_THAT(Create(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dlock
