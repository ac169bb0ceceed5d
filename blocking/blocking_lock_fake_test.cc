// BlockingLock directly over a SimpleLock on a FakeTransport, on a real loop
// thread: what Shutdown() guarantees about the leases guards still hold.
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class BlockingLockFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(OnLoop([this] {
                  server_ = std::make_unique<FakeRedis>(thread_.loop());
                  transport_ = std::make_unique<FakeTransport>(thread_.loop(), server_.get());
                  lock_ = std::make_unique<SimpleLock>(thread_.loop(), transport_.get());
                }),
                IsOk());
  }
  void TearDown() override {
    EXPECT_THAT(OnLoop([this] {
                  lock_.reset();
                  transport_.reset();
                  server_.reset();
                }),
                IsOk());
  }

  template <typename Fn>
  absl::Status OnLoop(Fn fn) {
    return PostAndWait<absl::Status>(&thread_, [&fn](Completion<absl::Status> done) {
      fn();
      done(absl::OkStatus());
    });
  }

  bool KeyExists(const char* key) {
    bool exists = false;
    EXPECT_THAT(OnLoop([&] { exists = server_->Exists(key); }), IsOk());
    return exists;
  }

  UvLoopThread thread_;
  // Loop thread only.
  std::unique_ptr<FakeRedis> server_;
  std::unique_ptr<FakeTransport> transport_;
  std::unique_ptr<SimpleLock> lock_;
};

TEST_F(BlockingLockFakeTest, ShutdownReturnsOnlyOnceItsReleasesAreAnswered) {
  BlockingLock facade(&thread_, lock_.get());
  absl::StatusOr<LockGuard> guard = facade.TryLock("orders/7", absl::Seconds(30));
  ASSERT_THAT(guard.status(), IsOk());
  // The release Shutdown sends takes 200 ms to reach the server (and as
  // long to be answered).
  ASSERT_THAT(OnLoop([this] { transport_->SetLatency(absl::Milliseconds(400)); }), IsOk());
  facade.Shutdown();
  EXPECT_FALSE(KeyExists("dlock:{orders/7}"));
  EXPECT_FALSE(guard->IsValid());
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace dlock
