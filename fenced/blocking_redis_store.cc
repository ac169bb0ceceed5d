#include "dlock/fenced/blocking_redis_store.h"

#include <string>
#include <utility>

#include "dlock/blocking/post_and_wait.h"

namespace dlock {
namespace fenced {

absl::StatusOr<RedisWriteResult> BlockingRedisFencedStore::Write(absl::string_view resource,
                                                                 int64_t fence,
                                                                 RedisWrite write) {
  using Result = absl::StatusOr<RedisWriteResult>;
  return PostAndWait<Result>(
      thread_, [this, resource = std::string(resource), fence,
                write = std::move(write)](Completion<Result> done) mutable {
        // A rejected call destroys its callback: report the rejection
        // through a second handle.
        Completion<Result> mine = done.Share();
        absl::Status sent = store_->Write(resource, fence, std::move(write), std::move(done));
        if (!sent.ok()) mine(sent);
      });
}

absl::StatusOr<int64_t> BlockingRedisFencedStore::HighestFence(absl::string_view resource) {
  using Result = absl::StatusOr<int64_t>;
  return PostAndWait<Result>(
      thread_, [this, resource = std::string(resource)](Completion<Result> done) mutable {
        Completion<Result> mine = done.Share();
        absl::Status sent = store_->HighestFence(resource, std::move(done));
        if (!sent.ok()) mine(sent);
      });
}

}  // namespace fenced
}  // namespace dlock
