#include "dlock/blocking/post_and_wait.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(PostAndWaitTest, RunsOnTheLoopThreadAndReturnsTheResult) {
  UvLoopThread thread;
  absl::StatusOr<int> r = PostAndWait<absl::StatusOr<int>>(
      &thread, [&thread](Completion<absl::StatusOr<int>> done) {
        done(thread.InLoopThread() ? 42 : -1);
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 42);
}

TEST(PostAndWaitTest, ACompletionHandedToATimerCompletesLater) {
  UvLoopThread thread;
  absl::Status s = PostAndWait<absl::Status>(&thread, [&thread](Completion<absl::Status> done) {
    thread.loop()->RunAfter(absl::Milliseconds(20), [done = std::move(done)]() mutable {
      done(absl::AbortedError("from the timer"));
    });
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "from the timer");
}

TEST(PostAndWaitTest, ACompletionDestroyedWithoutAResultIsCancelled) {
  UvLoopThread thread;
  absl::Status s = PostAndWait<absl::Status>(&thread, [](Completion<absl::Status>) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
}

// Shared handles: the first result wins, and the caller waits until every
// handle is gone (nothing on the loop touches the call after it returned).
TEST(PostAndWaitTest, FirstResultWinsAndTheCallerWaitsForEveryHandle) {
  UvLoopThread thread;
  auto late_ran = std::make_shared<bool>(false);  // loop thread, then read after
  absl::Status s =
      PostAndWait<absl::Status>(&thread, [&thread, late_ran](Completion<absl::Status> done) {
        Completion<absl::Status> other = done.Share();
        EXPECT_TRUE(other.pending());
        done(absl::NotFoundError("first"));
        EXPECT_FALSE(done.pending());
        thread.loop()->RunAfter(absl::Milliseconds(20),
                                [other = std::move(other), late_ran]() mutable {
                                  *late_ran = true;
                                  other(absl::OkStatus());
                                });
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  // Returned only after the second handle was used (and dropped).
  EXPECT_TRUE(*late_ran);
}

// A rejected request: the async API destroyed its callback's handle inside
// the call; a shared handle still reports the rejection.
TEST(PostAndWaitTest, ASharedHandleReportsARejection) {
  UvLoopThread thread;
  absl::Status s = PostAndWait<absl::Status>(&thread, [](Completion<absl::Status> done) {
    Completion<absl::Status> mine = done.Share();
    { Completion<absl::Status> swallowed = std::move(done); }  // "rejected"
    mine(absl::InvalidArgumentError("rejected"));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

class RefusingThread : public LoopThread {
 public:
  EventLoop* loop() override { return nullptr; }
  bool Post(absl::AnyInvocable<void() &&> fn) override { return false; }
  bool InLoopThread() const override { return false; }
};

TEST(PostAndWaitTest, AStatusKeepsItsPayloads) {
  UvLoopThread thread;
  absl::StatusOr<int> r = PostAndWait<absl::StatusOr<int>>(&thread, [](auto done) {
    absl::Status s = absl::FailedPreconditionError("stale");
    s.SetPayload("dlock.test/payload", absl::Cord("7"));
    done(s);
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r.status().GetPayload("dlock.test/payload").has_value());
  EXPECT_EQ(std::string(*r.status().GetPayload("dlock.test/payload")), "7");
}

TEST(PostAndWaitTest, ARefusedPostIsCancelled) {
  RefusingThread thread;
  bool ran = false;
  absl::Status s = PostAndWait<absl::Status>(&thread, [&ran](Completion<absl::Status> done) {
    ran = true;
    done(absl::OkStatus());
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(ran);
}

TEST(PostAndWaitTest, OnTheLoopThreadItIsFailedPrecondition) {
  UvLoopThread thread;
  absl::Status inner;
  absl::Status outer = PostAndWait<absl::Status>(&thread, [&](Completion<absl::Status> done) {
    inner = PostAndWait<absl::Status>(&thread, [](Completion<absl::Status> d) {
      d(absl::OkStatus());
    });
    done(absl::OkStatus());
  });
  EXPECT_TRUE(outer.ok());
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dlock
