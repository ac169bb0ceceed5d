// BlockingClient::Connect with a redis-cluster:// URL: the threaded facade
// (RetryLock over SimpleLock or ReentrantLock, watchdog renewal) on a real
// 3 + 3 Redis Cluster, unchanged.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/blocking/connect.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/testing/status_matchers.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

TEST(BlockingClientClusterTest, LocksRenewsAndNestsOverAClusterUrl) {
  auto cluster = test_support::RedisCluster::Start({});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (const bool reentrant : {false, true}) {
    ConnectOptions o;
    o.redis_urls = {(*cluster)->url()};
    o.reentrant = reentrant;
    auto a = ConnectBlockingClient(o);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = ConnectBlockingClient(o);
    ASSERT_TRUE(b.ok()) << b.status();
    for (int i = 0; i < 20; ++i) {
      const std::string r = absl::StrCat(reentrant ? "nested/" : "plain/", i);
      auto g = (*a)->TryLock(r, absl::Milliseconds(300));
      ASSERT_THAT(g.status(), IsOk()) << r;
      EXPECT_THAT((*b)->TryLock(r, absl::Seconds(1)).status(),
                  StatusIs(absl::StatusCode::kAborted));
      if (reentrant) {
        auto inner = (*a)->TryLock(r, absl::Seconds(1));  // same thread: nests
        ASSERT_THAT(inner.status(), IsOk());
      }
    }
    // Renewed past its 300 ms ttl by the watchdog.
    auto held = (*a)->TryLock("renewed", absl::Milliseconds(300));
    ASSERT_THAT(held.status(), IsOk());
    auto waited = (*b)->Lock("renewed", absl::Seconds(1), absl::Milliseconds(900));
    EXPECT_THAT(waited.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_TRUE(held->IsValid());
  }
}

}  // namespace
}  // namespace dlock
