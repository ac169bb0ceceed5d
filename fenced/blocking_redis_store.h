// This header defines `BlockingRedisFencedStore`: RedisFencedStore
// (redis_store.h) for threaded programs. Each call posts the store's async
// call to the loop thread the store's transport runs on and waits for its
// outcome (PostAndWait, dlock/blocking/post_and_wait.h), so the blocking
// and the async store are one implementation.
//
//   UvLoopThread thread;                    // or any LoopThread
//   std::unique_ptr<Transport> t;  std::unique_ptr<RedisFencedStore> s;
//   PostAndWait<absl::Status>(&thread, ...make t and s on the loop...);
//   BlockingRedisFencedStore store(&thread, s.get());
//   absl::StatusOr<RedisWriteResult> r = store.Write(
//       "sku-42", guard->lease().fence,
//       RedisWrite().IncrBy(s->DataKey("sku-42", "stock:"), -1, 0));
//   if (IsStaleFence(r.status())) { /* a newer holder wrote: stop */ }
//
// Outcomes: those of RedisFencedStore::Write / HighestFence (including its
// synchronous kInvalidArgument rejections), plus kCancelled when the loop
// thread is stopping, and kFailedPrecondition when called on the loop
// thread itself (it would wait for itself).
//
// This class is thread-safe: call it from any number of threads but the
// loop thread. `thread` and `store` are borrowed and must outlive it; the
// store must only be used on `thread`'s loop (it is not thread-safe).
#ifndef DLOCK_FENCED_BLOCKING_REDIS_STORE_H_
#define DLOCK_FENCED_BLOCKING_REDIS_STORE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/transport/loop_thread.h"

namespace dlock {
namespace fenced {

class BlockingRedisFencedStore {
 public:
  BlockingRedisFencedStore(LoopThread* thread, RedisFencedStore* store)
      : thread_(thread), store_(store) {}

  // RedisFencedStore::Write, waited for.
  absl::StatusOr<RedisWriteResult> Write(absl::string_view resource, int64_t fence,
                                         RedisWrite write);
  // RedisFencedStore::HighestFence, waited for.
  absl::StatusOr<int64_t> HighestFence(absl::string_view resource);

 private:
  LoopThread* thread_;
  RedisFencedStore* store_;
};

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_BLOCKING_REDIS_STORE_H_
