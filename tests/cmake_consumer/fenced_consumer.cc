// An out-of-tree user of dlock's fenced writes (dlock::fenced): the Redis
// fenced store on dlock::fake (FakeRedis + FakeTransport on a
// ManualEventLoop), no server. Exits 0 when a write with fence 2 applies,
// a later write with fence 1 is refused as stale (highest seen 2), and a
// decrement below its floor is refused without writing.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

absl::StatusOr<dlock::fenced::RedisWriteResult> Write(dlock::ManualEventLoop& loop,
                                                      dlock::fenced::RedisFencedStore& store,
                                                      int64_t fence,
                                                      dlock::fenced::RedisWrite write) {
  std::optional<absl::StatusOr<dlock::fenced::RedisWriteResult>> result;
  absl::Status sent = store.Write("sku-42", fence, std::move(write),
                                  [&](auto r) { result = std::move(r); });
  if (!sent.ok()) return sent;
  loop.RunUntilIdle();
  if (!result) return absl::InternalError("callback did not run");
  return *result;
}

}  // namespace

int main() {
  dlock::ManualEventLoop loop;
  dlock::FakeRedis server(&loop);
  dlock::FakeTransport conn(&loop, &server);
  dlock::fenced::RedisFencedStore store(&conn);
  const std::string stock = store.DataKey("sku-42", "stock:");
  auto first = Write(loop, store, 2, dlock::fenced::RedisWrite().IncrBy(stock, 1));
  Check(first.ok() && first->values.at(0) == 1, "fence 2 applies: " + first.status().ToString());
  auto stale = Write(loop, store, 1, dlock::fenced::RedisWrite().IncrBy(stock, 1));
  Check(dlock::fenced::HighestSeenFence(stale.status()) == 2,
        "fence 1 is stale, highest 2: " + stale.status().ToString());
  auto floor = Write(loop, store, 2, dlock::fenced::RedisWrite().IncrBy(stock, -2, 0));
  Check(dlock::fenced::IsBelowFloor(floor.status()),
        "below the floor: " + floor.status().ToString());
  std::printf("%s\n", failures == 0 ? "fenced consumer: all ok" : "fenced consumer: FAILED");
  return failures == 0 ? 0 : 1;
}
