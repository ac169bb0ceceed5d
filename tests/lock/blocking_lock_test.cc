// The blocking facade (lock/blocking_lock.h) from many threads, on a real
// redis-server: HiredisTransport + SimpleLock/RetryLock/ReentrantLock live on
// a UvLoopThread; test threads call BlockingLock. Runs clean under
// --config=tsan.
#include "dlock/blocking/blocking_lock.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/loop_thread_server.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

using ::dlock::test_support::RunOnLoop;

class BlockingLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(env_.Start());
    thread_ = env_.thread();
    env_.Run([this] {
      HiredisTransport* transport = env_.transport();
      simple_ = std::make_unique<SimpleLock>(env_.loop(), transport);
      RetryLockOptions ro;
      ro.initial_backoff = absl::Milliseconds(5);
      ro.max_backoff = absl::Milliseconds(100);
      retry_ = std::make_unique<RetryLock>(env_.loop(), simple_.get(), ro);
      reentrant_ = std::make_unique<ReentrantLock>(env_.loop(), transport);
    });
    simple_locks_ = std::make_unique<BlockingLock>(thread_, simple_.get());
    retry_locks_ = std::make_unique<BlockingLock>(thread_, retry_.get());
    reentrant_locks_ = std::make_unique<BlockingLock>(thread_, reentrant_.get());
  }

  void TearDown() override {
    simple_locks_.reset();
    retry_locks_.reset();
    reentrant_locks_.reset();
    env_.Stop([this] {
      retry_.reset();
      simple_.reset();
      reentrant_.reset();
    });
  }

  Reply Server(std::vector<std::string> argv) { return env_.Server(std::move(argv)); }

  KeyScheme keys_;
  test_support::LoopThreadServer env_;
  UvLoopThread* thread_ = nullptr;
  // Loop-thread objects.
  std::unique_ptr<SimpleLock> simple_;
  std::unique_ptr<RetryLock> retry_;
  std::unique_ptr<ReentrantLock> reentrant_;
  // Facades.
  std::unique_ptr<BlockingLock> simple_locks_;
  std::unique_ptr<BlockingLock> retry_locks_;
  std::unique_ptr<BlockingLock> reentrant_locks_;
};

TEST_F(BlockingLockTest, GuardReleasesWhenItLeavesScope) {
  {
    absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("r", absl::Seconds(10));
    ASSERT_THAT(guard, IsOk());
    EXPECT_TRUE(guard->owns_lock());
    EXPECT_TRUE(guard->IsValid());
    EXPECT_GE(guard->lease().fence, 1);
    EXPECT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String(guard->lease().token));
    // Held: a second TryLock fails at once.
    EXPECT_THAT(simple_locks_->TryLock("r", absl::Seconds(10)),
                StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

// Issue 23: 1,000 resources locked and released leave the server's fence
// high-water mark and the data-set marker, nothing per resource; fences
// rise across all of them.
TEST_F(BlockingLockTest, AThousandResourcesLeaveTwoKeysOnARealServer) {
  int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<LockGuard> guard =
        simple_locks_->TryLock("order:" + std::to_string(i), absl::Seconds(10));
    ASSERT_THAT(guard, IsOk());
    EXPECT_GT(guard->lease().fence, last);
    last = guard->lease().fence;
  }
  const Reply size = Server({"DBSIZE"});
  EXPECT_LE(size.integer, 2) << size.DebugString();
  EXPECT_EQ(Server({"EXISTS", keys_.FenceHwmKey(), keys_.DataSetKey()}), Reply::Integer(2));
}

// Fencing on, the restart window off (SimpleLock's default): the common
// acquire is one MULTI / SET NX PX GET / INCR / GET marker / EXEC, no
// EVALSHA; the first acquire on a server without a mark goes through the
// rare path (a script) once. Fences rise; another type under the lock key
// is foreign data, a string with no TTL reads as held.
TEST_F(BlockingLockTest, AFencedAcquireIsOneTransactionOnARealServer) {
  absl::StatusOr<LockGuard> warm = simple_locks_->TryLock("warm", absl::Seconds(10));
  ASSERT_THAT(warm, IsOk());
  const int64_t warm_fence = warm->lease().fence;
  ASSERT_THAT(warm->Unlock(), IsOk());
  Server({"CONFIG", "RESETSTAT"});
  absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("tx", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  EXPECT_GT(guard->lease().fence, warm_fence);
  EXPECT_EQ(Server({"GET", keys_.LockKey("tx")}), Reply::String(guard->lease().token));
  EXPECT_GT(Server({"PTTL", keys_.LockKey("tx")}).integer, 0);
  const Reply stats = Server({"INFO", "commandstats"});
  EXPECT_THAT(stats.str, ::testing::HasSubstr("cmdstat_exec:calls=1,"));
  EXPECT_THAT(stats.str, ::testing::HasSubstr("cmdstat_incr:calls=1,"));
  EXPECT_THAT(stats.str, ::testing::Not(::testing::HasSubstr("cmdstat_evalsha")));
  EXPECT_THAT(simple_locks_->TryLock("tx", absl::Seconds(10)),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(guard->Unlock(), IsOk());
  Server({"HSET", keys_.LockKey("hash"), "f", "v"});
  EXPECT_THAT(simple_locks_->TryLock("hash", absl::Seconds(10)),
              StatusIs(absl::StatusCode::kInternal));
  Server({"SET", keys_.LockKey("left"), "behind"});
  EXPECT_THAT(simple_locks_->TryLock("left", absl::Seconds(10)),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(Server({"GET", keys_.LockKey("left")}), Reply::String("behind"));
}

// Fencing and the restart window off: the acquire is one plain
// `SET NX PX GET` (no script); on a real server it grants, refuses a holder,
// refuses another type as foreign data, and writes no fence mark.
TEST_F(BlockingLockTest, WithFencingOffAnAcquireIsOnePlainCommandOnARealServer) {
  std::unique_ptr<SimpleLock> unfenced;
  env_.Run([&] {
    SimpleLockOptions o;
    o.fencing = false;
    unfenced = std::make_unique<SimpleLock>(env_.loop(), env_.transport(), o);
  });
  auto locks = std::make_unique<BlockingLock>(thread_, unfenced.get());
  Server({"CONFIG", "RESETSTAT"});
  absl::StatusOr<LockGuard> guard = locks->TryLock("plain", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  EXPECT_EQ(guard->lease().fence, 0);
  EXPECT_EQ(Server({"GET", keys_.LockKey("plain")}), Reply::String(guard->lease().token));
  const Reply pttl = Server({"PTTL", keys_.LockKey("plain")});
  EXPECT_GT(pttl.integer, 0) << pttl.DebugString();
  const Reply stats = Server({"INFO", "commandstats"});
  EXPECT_THAT(stats.str, ::testing::HasSubstr("cmdstat_set:calls=1,"));
  EXPECT_THAT(stats.str, ::testing::Not(::testing::HasSubstr("cmdstat_evalsha")));
  EXPECT_THAT(locks->TryLock("plain", absl::Seconds(10)), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(guard->Unlock(), IsOk());
  Server({"HSET", keys_.LockKey("hash"), "f", "v"});
  EXPECT_THAT(locks->TryLock("hash", absl::Seconds(10)), StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(Server({"TYPE", keys_.LockKey("hash")}), Reply::Status("hash"));
  // Released, and no fence mark was ever written.
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("plain"), keys_.FenceHwmKey()}), Reply::Integer(0));
  locks.reset();
  env_.Run([&] { unfenced.reset(); });
}

TEST_F(BlockingLockTest, UnlockReportsAReleaseThatFoundTheKeyGone) {
  absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("r", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  // As if it expired and someone else took it.
  Server({"SET", keys_.LockKey("r"), "someone-else"});
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(guard->owns_lock());
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String("someone-else"));
}

TEST_F(BlockingLockTest, MovingAGuardMovesOwnership) {
  absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("r", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  LockGuard moved = *std::move(guard);
  EXPECT_TRUE(moved.owns_lock());
  LockGuard other;
  EXPECT_FALSE(other.owns_lock());
  other = std::move(moved);
  EXPECT_FALSE(moved.owns_lock());  // NOLINT: checking the moved-from state
  ASSERT_TRUE(other.owns_lock());
  // A guard moved to another thread is released there.
  std::thread([g = std::move(other)]() mutable { EXPECT_THAT(g.Unlock(), IsOk()); }).join();
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

TEST_F(BlockingLockTest, ReleaseHandsTheLeaseToTheCaller) {
  absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("r", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  Lease lease = guard->Release();
  EXPECT_FALSE(guard->owns_lock());
  guard = absl::StatusOr<LockGuard>(LockGuard());  // destroying does nothing now
  EXPECT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String(lease.token));
}

TEST_F(BlockingLockTest, ExtendGivesANewLease) {
  absl::StatusOr<LockGuard> guard = simple_locks_->TryLock("r", absl::Seconds(2));
  ASSERT_THAT(guard, IsOk());
  absl::StatusOr<Lease> extended = simple_locks_->Extend(*guard, absl::Seconds(60));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(extended->ttl, absl::Seconds(60));
  EXPECT_GT(Server({"PTTL", keys_.LockKey("r")}).integer, 50000);
}

TEST_F(BlockingLockTest, LockWaitsUntilTimeoutWhileHeld) {
  absl::StatusOr<LockGuard> held = retry_locks_->TryLock("r", absl::Seconds(30));
  ASSERT_THAT(held, IsOk());
  std::thread([this] {
    EXPECT_THAT(retry_locks_->Lock("r", absl::Seconds(5), absl::Milliseconds(200)),
                StatusIs(absl::StatusCode::kDeadlineExceeded));
  }).join();
}

TEST_F(BlockingLockTest, WaiterGetsTheLockWhenTheHolderReleases) {
  absl::StatusOr<LockGuard> held = retry_locks_->TryLock("r", absl::Seconds(30));
  ASSERT_THAT(held, IsOk());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    absl::StatusOr<LockGuard> g = retry_locks_->Lock("r", absl::Seconds(5), absl::Seconds(20));
    EXPECT_THAT(g, IsOk());
    got = g.ok();
  });
  EXPECT_THAT(held->Unlock(), IsOk());
  waiter.join();
  EXPECT_TRUE(got);
}

TEST_F(BlockingLockTest, ManyThreadsNeverHoldTheLockTogether) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 15;
  int counter = 0;  // plain int: TSan reports it if exclusion ever fails
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        absl::StatusOr<LockGuard> g =
            retry_locks_->Lock("counter", absl::Seconds(10), absl::Seconds(60));
        if (!g.ok()) {
          ++failures;
          continue;
        }
        int now = ++inside;
        int prev = max_inside.load();
        while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
        }
        ++counter;
        --inside;
        if (!g->Unlock().ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(counter, kThreads * kRounds);
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("counter")}), Reply::Integer(0));
}

TEST_F(BlockingLockTest, ShutdownReleasesHeldLeasesAndGuardsMayOutliveTheFacade) {
  absl::StatusOr<LockGuard> guard = retry_locks_->TryLock("r", absl::Seconds(30));
  ASSERT_THAT(guard, IsOk());
  absl::StatusOr<LockGuard> detached = retry_locks_->TryLock("d", absl::Seconds(30));
  ASSERT_THAT(detached, IsOk());
  const Lease lease = detached->Release();
  retry_locks_.reset();
  // Released by the shutdown; a detached lease is the caller's own.
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
  EXPECT_EQ(Server({"GET", keys_.LockKey("d")}), Reply::String(lease.token));
  EXPECT_TRUE(guard->owns_lock());
  EXPECT_FALSE(guard->IsValid());
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_FALSE(guard->owns_lock());
}

TEST_F(BlockingLockTest, ShutdownCancelsAWaitingLockAndRefusesNewCalls) {
  absl::StatusOr<LockGuard> held = simple_locks_->TryLock("r", absl::Seconds(30));
  ASSERT_THAT(held, IsOk());
  std::promise<absl::Status> waited;
  std::thread waiter([&] {
    waited.set_value(retry_locks_->Lock("r", absl::Seconds(30), absl::Seconds(60)).status());
  });
  // Until the Lock is waiting inside the RetryLock.
  size_t waiting = 0;
  while (waiting == 0) RunOnLoop(*thread_, [&] { waiting = retry_->waiting(); });
  retry_locks_->Shutdown();
  EXPECT_THAT(waited.get_future().get(), StatusIs(absl::StatusCode::kCancelled));
  waiter.join();
  RunOnLoop(*thread_, [&] { waiting = retry_->waiting(); });
  EXPECT_EQ(waiting, 0u);
  EXPECT_THAT(retry_locks_->TryLock("x", absl::Seconds(1)),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(retry_locks_->Lock("x", absl::Seconds(1), absl::Seconds(1)),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("x")}), Reply::Integer(0));
  // The holder of another facade is untouched.
  EXPECT_EQ(Server({"GET", keys_.LockKey("r")}), Reply::String(held->lease().token));
}

TEST_F(BlockingLockTest, ReentrantFacadeNestsPerThread) {
  absl::StatusOr<LockGuard> outer = reentrant_locks_->TryLock("r", absl::Seconds(10));
  ASSERT_THAT(outer, IsOk());
  absl::StatusOr<LockGuard> inner = reentrant_locks_->TryLock("r", absl::Seconds(10));
  ASSERT_THAT(inner, IsOk());
  EXPECT_EQ(inner->lease().token, outer->lease().token);
  // Another thread of the same process is another owner.
  std::thread([this] {
    EXPECT_THAT(reentrant_locks_->TryLock("r", absl::Seconds(10)),
                StatusIs(absl::StatusCode::kAborted));
  }).join();
  EXPECT_THAT(inner->Unlock(), IsOk());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(1));
  EXPECT_THAT(outer->Unlock(), IsOk());
  EXPECT_EQ(Server({"EXISTS", keys_.LockKey("r")}), Reply::Integer(0));
}

TEST_F(BlockingLockTest, BadArgumentsAreRejected) {
  EXPECT_THAT(simple_locks_->TryLock("", absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(simple_locks_->TryLock("r", absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(retry_locks_->Lock("r", absl::Seconds(1), absl::Seconds(-1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(BlockingLockTest, CallingFromTheLoopThreadFailsInsteadOfDeadlocking) {
  absl::StatusOr<LockGuard> result = absl::UnknownError("not run");
  RunOnLoop(*thread_, [&] { result = simple_locks_->TryLock("r", absl::Seconds(1)); });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A LoopThread that is shutting down: refuses every Post.
class StoppedLoopThread : public LoopThread {
 public:
  EventLoop* loop() override { return nullptr; }
  bool Post(absl::AnyInvocable<void() &&> fn) override { return false; }
  bool InLoopThread() const override { return false; }
};

TEST(BlockingLockStoppedTest, CallsOnAStoppedLoopThreadAreCancelled) {
  StoppedLoopThread thread;
  BlockingLock locks(&thread, nullptr);
  EXPECT_THAT(locks.TryLock("r", absl::Seconds(1)), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(locks.Lock("r", absl::Seconds(1), absl::Seconds(1)),
              StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace dlock
