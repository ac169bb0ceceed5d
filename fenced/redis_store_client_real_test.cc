// RedisFencedStoreClient on real redis-servers, the way docs/fencing.md
// shows it: the locks on one server (BlockingClient), the data on another.
// Holder A's lease ends while A still runs (here its lock key is deleted,
// as an expiry would), B takes the lock with a higher fence and writes;
// A's late write is refused by the store. The lines between the SNIPPET
// markers are the ones docs/fencing.md shows (tools/check_readme_snippets).
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/blocking/connect.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/fenced/redis_store_client.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"

namespace dlock {
namespace fenced {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::StatusIs;

// One holder's critical section: sell one unit of `sku` under `guard`.
// Returns the write's outcome.
absl::Status SellOne(RedisFencedStoreClient* store, const LockGuard& guard,
                     const std::string& sku) {
  // SNIPPET BEGIN
  // Decrement the stock only if this lease's fence is still current on the
  // store, and never below 0: one atomic script on the store's server.
  const int64_t fence = guard.lease().fence;
  absl::StatusOr<RedisWriteResult> written = store->Write(
      sku, fence,
      RedisWrite()
          .IncrBy(store->DataKey(sku, "stock:"), -1, /*floor=*/0)
          .HashSet(store->DataKey(sku, "last-sale:"), {{"fence", std::to_string(fence)}}));
  if (IsStaleFence(written.status())) {
    // A newer holder has written: our lease ended while we ran. Stop.
    return written.status();
  }
  if (IsBelowFloor(written.status())) return written.status();  // sold out
  // SNIPPET END
  return written.status();
}

TEST(RedisFencedStoreClientTest, APausedHoldersLateWriteIsRefusedByTheStore) {
  auto lock_server = RedisServer::Start();
  ASSERT_THAT(lock_server.status(), IsOk());
  auto store_server = RedisServer::Start();
  ASSERT_THAT(store_server.status(), IsOk());
  ASSERT_THAT((*store_server)->Command({"SET", "stock:{sku-42}", "5"}).status(), IsOk());

  ConnectOptions lock_options;
  lock_options.redis_urls = {absl::StrCat("redis://", (*lock_server)->address())};
  lock_options.auto_renew = false;
  auto locks = ConnectBlockingClient(lock_options);
  ASSERT_THAT(locks.status(), IsOk());
  auto store =
      RedisFencedStoreClient::Connect(absl::StrCat("redis://", (*store_server)->address()));
  ASSERT_THAT(store.status(), IsOk());

  auto a = (*locks)->Lock("sku-42", absl::Seconds(30), absl::Seconds(5));
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(SellOne(store->get(), *a, "sku-42"), IsOk());
  // A's lease ends while A is paused (the key expires: here, deleted).
  ASSERT_THAT((*lock_server)->Command({"DEL", "dlock:{sku-42}"}).status(), IsOk());
  auto b = (*locks)->Lock("sku-42", absl::Seconds(30), absl::Seconds(5));
  ASSERT_THAT(b.status(), IsOk());
  ASSERT_GT(b->lease().fence, a->lease().fence);
  ASSERT_THAT(SellOne(store->get(), *b, "sku-42"), IsOk());
  // A resumes: its write is refused, B's stands.
  absl::Status late = SellOne(store->get(), *a, "sku-42");
  EXPECT_TRUE(IsStaleFence(late)) << late;
  EXPECT_EQ(HighestSeenFence(late), b->lease().fence);
  EXPECT_EQ((*store_server)->Command({"GET", "stock:{sku-42}"})->str, "3");
  EXPECT_EQ((*store_server)->Command({"HGET", "last-sale:{sku-42}", "fence"})->str,
            std::to_string(b->lease().fence));
  EXPECT_THAT((*store)->HighestFence("sku-42"),
              ::dlock::test_support::IsOkAndHolds(b->lease().fence));
}

TEST(RedisFencedStoreClientTest, ConnectRefusesABadUrlAndReportsAStoreThatIsDown) {
  EXPECT_THAT(RedisFencedStoreClient::Connect("http://nowhere").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto server = RedisServer::Start();
  ASSERT_THAT(server.status(), IsOk());
  const std::string url = absl::StrCat("redis://", (*server)->address());
  ASSERT_THAT((*server)->Stop(), IsOk());
  EXPECT_THAT(RedisFencedStoreClient::Connect(url, {}, absl::Seconds(2)).status(),
              StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace fenced
}  // namespace dlock
