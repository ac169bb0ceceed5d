// This header defines `RedisFencedStoreClient`: the Redis fenced store
// (redis_store.h) for a threaded program in one call, as BlockingClient is
// for the locks. It owns a loop thread (UvLoopThread), one connection to the
// store's URL (UvTransport: plain, TLS, unix socket, Sentinel or Cluster)
// and the store, and blocks each call until the store answered
// (BlockingRedisFencedStore). The store may be the lock's Redis or another.
//
//   auto store = RedisFencedStoreClient::Connect("redis://127.0.0.1:6380");
//   absl::StatusOr<RedisWriteResult> r = (*store)->Write(
//       "sku-42", guard->lease().fence,
//       RedisWrite().IncrBy((*store)->DataKey("sku-42", "stock:"), -1, 0));
//   if (IsStaleFence(r.status())) { /* a newer holder wrote: stop */ }
//
// Outcomes: those of RedisFencedStore (Write, HighestFence); kCancelled once
// the client is being destroyed. Connect returns kInvalidArgument for a URL
// ParseRedisUrl rejects (never naming its password) or bad options, and
// kUnavailable when the store cannot be reached within `connect_timeout`.
//
// This class is thread-safe: Write/HighestFence may be called from any
// number of threads at once. The destructor closes the connection (calls in
// flight get kCancelled) and joins the loop thread; no call may begin after
// it began.
#ifndef DLOCK_FENCED_REDIS_STORE_CLIENT_H_
#define DLOCK_FENCED_REDIS_STORE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/fenced/blocking_redis_store.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/transport/transport.h"

namespace dlock {

class UvLoopThread;

namespace fenced {

class RedisFencedStoreClient {
 public:
  // Starts the loop thread and connects to `url` (a URL without a password
  // takes it from $DLOCK_REDIS_PASSWORD).
  static absl::StatusOr<std::unique_ptr<RedisFencedStoreClient>> Connect(
      absl::string_view url, RedisFencedStoreOptions options = {},
      absl::Duration connect_timeout = absl::Seconds(5));

  RedisFencedStoreClient(const RedisFencedStoreClient&) = delete;
  RedisFencedStoreClient& operator=(const RedisFencedStoreClient&) = delete;
  ~RedisFencedStoreClient();

  // RedisFencedStore::Write, waited for.
  absl::StatusOr<RedisWriteResult> Write(absl::string_view resource, int64_t fence,
                                         RedisWrite write);
  // RedisFencedStore::HighestFence, waited for.
  absl::StatusOr<int64_t> HighestFence(absl::string_view resource);
  // RedisFencedStore::DataKey / FenceKey (pure functions of the options).
  std::string DataKey(absl::string_view resource, absl::string_view name) const;
  std::string FenceKey(absl::string_view resource) const;

 private:
  RedisFencedStoreClient();

  std::unique_ptr<UvLoopThread> thread_;
  // Made, used and destroyed on the loop thread.
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<RedisFencedStore> store_;
  std::unique_ptr<BlockingRedisFencedStore> blocking_;
};

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_REDIS_STORE_CLIENT_H_
