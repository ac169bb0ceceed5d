// BlockingLock with auto_renew (the blocking facade with renewal) on a real
// redis-server: HiredisTransport + policies live on a UvLoopThread; the test
// thread holds guards. Holding periods are waits on a loop timer (the
// behaviour under test is "holds for N seconds"), and every wait for an
// event is bounded.
#include "dlock/blocking/blocking_lock.h"

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/loop_thread_server.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

using ::dlock::test_support::RunOnLoop;

class RenewingBlockingLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(env_.Start());
    thread_ = env_.thread();
    server_ = &env_.server();
    env_.Run([this] {
      SimpleLockOptions simple_options;
      // Covers timer latency of sanitizer builds on a loaded machine.
      simple_options.drift_constant = absl::Milliseconds(50);
      simple_ = std::make_unique<SimpleLock>(env_.loop(), env_.transport(),
                                             simple_options);
      reentrant_ = std::make_unique<ReentrantLock>(env_.loop(), env_.transport());
    });
  }

  void TearDown() override {
    env_.ResumeIfPaused();
    locks_.reset();
    env_.Stop([this] {
      simple_.reset();
      reentrant_.reset();
    });
  }

  BlockingLock& Locks(dlock::Lock* lock, RenewalOptions renewal = {}) {
    BlockingLockOptions options;
    options.auto_renew = true;
    options.renewal = std::move(renewal);
    locks_ = std::make_unique<BlockingLock>(thread_, lock, std::move(options));
    return *locks_;
  }

  // Waits `d` of loop time (a loop timer, not a sleep).
  void HoldFor(absl::Duration d) {
    std::promise<void> done;
    RunOnLoop(*thread_, [&] {
      thread_->loop()->RunAfter(d, [&] { done.set_value(); });
    });
    done.get_future().wait();
  }

  Reply Server(std::vector<std::string> argv) { return env_.Server(std::move(argv)); }

  KeyScheme keys_;
  test_support::LoopThreadServer env_;
  UvLoopThread* thread_ = nullptr;
  test_support::RedisServer* server_ = nullptr;
  std::unique_ptr<SimpleLock> simple_;
  std::unique_ptr<ReentrantLock> reentrant_;
  std::unique_ptr<BlockingLock> locks_;
};

TEST_F(RenewingBlockingLockTest, GuardOutlivesItsTtlWhileRenewed) {
  BlockingLock& locks = Locks(simple_.get());
  absl::StatusOr<LockGuard> guard = locks.TryLock("r", absl::Seconds(1));
  ASSERT_THAT(guard, IsOk());
  for (int i = 0; i < 6; ++i) {
    HoldFor(absl::Milliseconds(500));
    ASSERT_TRUE(guard->IsValid()) << "after " << (i + 1) * 500 << " ms";
    ASSERT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String(guard->lease().token));
    // Another owner cannot take it.
    EXPECT_THAT(locks.TryLock("r", absl::Seconds(1)),
                StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_THAT(guard->Unlock(), IsOk());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

TEST_F(RenewingBlockingLockTest, GuardTurnsInvalidWhenTheServerStops) {
  std::promise<absl::Status> lost;
  RenewalOptions options;
  options.on_lost = [&lost](const Lease&, const absl::Status& why) { lost.set_value(why); };
  BlockingLock& locks = Locks(simple_.get(), std::move(options));
  absl::StatusOr<LockGuard> guard = locks.TryLock("r", absl::Seconds(1));
  ASSERT_THAT(guard, IsOk());
  EXPECT_TRUE(guard->IsValid());
  ASSERT_THAT(server_->Pause(), IsOk());
  std::future<absl::Status> why = lost.get_future();
  ASSERT_EQ(why.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_THAT(why.get(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(guard->IsValid());
  // on_lost came before the key expired on the server; stay stopped until
  // it has (the server's clock runs on while it is stopped).
  HoldFor(absl::Milliseconds(1200));
  ASSERT_THAT(server_->Resume(), IsOk());
  // The extends queued meanwhile are refused, and the release finds the
  // key gone.
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(RenewingBlockingLockTest, ReentrantGuardsAreRenewed) {
  BlockingLock& locks = Locks(reentrant_.get());
  absl::StatusOr<LockGuard> outer = locks.TryLock("r", absl::Seconds(1));
  ASSERT_THAT(outer, IsOk());
  absl::StatusOr<LockGuard> inner = locks.TryLock("r", absl::Seconds(1));
  ASSERT_THAT(inner, IsOk());
  HoldFor(absl::Milliseconds(2500));
  EXPECT_TRUE(outer->IsValid());
  EXPECT_TRUE(inner->IsValid());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(1));
  EXPECT_THAT(inner->Unlock(), IsOk());
  HoldFor(absl::Milliseconds(1500));
  EXPECT_TRUE(outer->IsValid());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(1));
  EXPECT_THAT(outer->Unlock(), IsOk());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

TEST_F(RenewingBlockingLockTest, DetachedGuardIsNoLongerRenewed) {
  BlockingLock& locks = Locks(simple_.get());
  absl::StatusOr<LockGuard> guard = locks.TryLock("r", absl::Seconds(1));
  ASSERT_THAT(guard, IsOk());
  Lease lease = guard->Release();
  EXPECT_FALSE(guard->owns_lock());
  EXPECT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String(lease.token));
  HoldFor(absl::Milliseconds(1500));
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

}  // namespace
}  // namespace dlock
