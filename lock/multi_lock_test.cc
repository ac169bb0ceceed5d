// MultiLock on FakeRedis in virtual time: all-or-nothing over SimpleLock,
// RetryLock and a ReadWriteLock view; a failure on the 2nd resource (busy,
// an injected error, a timed-out wait, a cancel) never leaves the 1st held
// once the callback reported it; the global order; bad input.
#include "dlock/lock/multi_lock.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;

AcquireOptions Opts(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

// Passes everything to `inner`, except that an acquire of `fail_resource`
// fails with `fail_status` (on the next loop turn) without reaching it.
class FailingLock : public Lock {
 public:
  FailingLock(EventLoop* loop, Lock* inner) : loop_(loop), inner_(inner) {}

  std::string fail_resource;
  absl::Status fail_status = absl::UnavailableError("injected");
  // Runs before each acquire that reaches `inner`, with its resource.
  std::function<void(absl::string_view)> before_acquire;

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override {
    if (resource != fail_resource) {
      if (before_acquire) before_acquire(resource);
      return inner_->Acquire(resource, options, std::move(callback));
    }
    loop_->RunAfter(absl::ZeroDuration(),
                    [cb = std::move(callback), s = fail_status]() mutable { std::move(cb)(s); });
    return AcquireHandle();
  }
  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return inner_->Release(lease, std::move(callback));
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl, LeaseCallback callback) override {
    return inner_->Extend(lease, ttl, std::move(callback));
  }

 private:
  EventLoop* loop_;
  Lock* inner_;
};

using Result = std::shared_ptr<absl::StatusOr<std::vector<Lease>>>;

class MultiLockTest : public ::testing::Test {
 protected:
  MultiLockTest()
      : server_(&loop_),
        conn_(&loop_, &server_),
        other_conn_(&loop_, &server_),
        simple_(&loop_, &conn_),
        other_(&loop_, &other_conn_) {
    server_.Execute(TrustDataSetCommand(keys_));
  }

  // Starts an acquire; on its callback, records which of the resources'
  // keys exist on the server at that very moment.
  Result Start(MultiLock& multi, std::vector<std::string> resources, AcquireOptions o,
               AcquireHandle* handle = nullptr) {
    auto out = std::make_shared<absl::StatusOr<std::vector<Lease>>>(
        absl::UnknownError("pending"));
    held_at_callback_.clear();
    absl::StatusOr<AcquireHandle> h = multi.Acquire(
        resources, o, [this, out, resources](absl::StatusOr<std::vector<Lease>> r) {
          for (const std::string& res : resources) {
            if (server_.Execute({"GET", keys_.LockKey(res)}).is_string()) {
              held_at_callback_.push_back(res);
            }
          }
          *out = std::move(r);
        });
    EXPECT_THAT(h, IsOk());
    if (handle != nullptr && h.ok()) *handle = *h;
    return out;
  }

  bool Held(absl::string_view resource) {
    return server_.Execute({"GET", keys_.LockKey(resource)}).is_string();
  }

  Lease Hold(absl::string_view resource) {
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    EXPECT_THAT(other_.Acquire(resource, Opts(absl::Seconds(60)),
                               [&](absl::StatusOr<Lease> r) { out = r; }),
                IsOk());
    loop_.RunUntilIdle();
    EXPECT_THAT(out, IsOk());
    return out.ok() ? *out : Lease();
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  FakeTransport other_conn_;
  SimpleLock simple_;
  SimpleLock other_;
  KeyScheme keys_;
  std::vector<std::string> held_at_callback_;
};

TEST_F(MultiLockTest, TakesEveryResourceInSortedOrderWithOneLeaseEach) {
  MultiLock multi(&loop_, &simple_);
  Result r = Start(multi, {"c", "a", "b"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  ASSERT_EQ((*r)->size(), 3u);
  EXPECT_EQ((**r)[0].resource, "a");
  EXPECT_EQ((**r)[1].resource, "b");
  EXPECT_EQ((**r)[2].resource, "c");
  EXPECT_NE((**r)[0].token, (**r)[1].token);
  EXPECT_TRUE(Held("a") && Held("b") && Held("c"));

  absl::StatusOr<std::vector<Lease>> extended = absl::UnknownError("pending");
  ASSERT_THAT(multi.Extend(**r, absl::Seconds(30),
                           [&](absl::StatusOr<std::vector<Lease>> e) { extended = e; }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ((*extended)[2].ttl, absl::Seconds(30));

  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(multi.Release(**r, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, IsOk());
  EXPECT_FALSE(Held("a") || Held("b") || Held("c"));
}

TEST_F(MultiLockTest, AnInjectedFailureOnTheSecondResourceReleasesTheFirstBeforeTheCallback) {
  FailingLock failing(&loop_, &simple_);
  failing.fail_resource = "b";
  MultiLock multi(&loop_, &failing);
  Result r = Start(multi, {"b", "a", "c"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(held_at_callback_, ElementsAre());
  EXPECT_FALSE(Held("a") || Held("b") || Held("c"));
}

TEST_F(MultiLockTest, ABusySecondResourceReleasesTheFirst) {
  Hold("b");
  MultiLock multi(&loop_, &simple_);
  Result r = Start(multi, {"a", "b"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(held_at_callback_, ElementsAre("b"));  // the other owner's
  EXPECT_FALSE(Held("a"));
}

TEST_F(MultiLockTest, ATimedOutWaitReleasesWhatWasTaken) {
  Hold("b");
  RetryLock retry(&loop_, &simple_);
  MultiLock multi(&loop_, &retry);
  Result r = Start(multi, {"a", "b"}, Opts(absl::Seconds(10), absl::Seconds(2)));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnknown(r->status()));
  EXPECT_TRUE(Held("a"));
  loop_.AdvanceTime(absl::Seconds(1));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(held_at_callback_, ElementsAre("b"));
  EXPECT_FALSE(Held("a"));
}

TEST_F(MultiLockTest, TheWaitCoversTheWholeAcquisitionAndWaitersGetInOnRelease) {
  Lease b = Hold("b");
  RetryLock retry(&loop_, &simple_);
  MultiLock multi(&loop_, &retry);
  Result r = Start(multi, {"a", "b"}, Opts(absl::Seconds(10), absl::Seconds(5)));
  loop_.AdvanceTime(absl::Seconds(1));
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(other_.Release(b, [&](absl::Status s) { released = s; }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(1));
  ASSERT_THAT(released, IsOk());
  EXPECT_THAT(*r, IsOk());
}

TEST_F(MultiLockTest, CancelReleasesWhatWasTakenAndTheCallbackNeverRuns) {
  Hold("b");
  RetryLock retry(&loop_, &simple_);
  MultiLock multi(&loop_, &retry);
  AcquireHandle h;
  Result r = Start(multi, {"a", "b"}, Opts(absl::Seconds(10), absl::Seconds(30)), &h);
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_TRUE(Held("a"));
  EXPECT_TRUE(h.Cancel());
  loop_.RunUntilIdle();
  EXPECT_FALSE(Held("a"));
  EXPECT_EQ(retry.waiting(), 0u);
  loop_.AdvanceTime(absl::Seconds(60));
  EXPECT_TRUE(absl::IsUnknown(r->status()));
  EXPECT_FALSE(h.Cancel());
}

TEST_F(MultiLockTest, AnUnknownOutcomeOnTheSecondResourceLeavesNothingBehind) {
  FailingLock hooked(&loop_, &simple_);
  // The 2nd acquire runs on the server but its reply is lost.
  hooked.before_acquire = [this](absl::string_view resource) {
    if (resource == "b") conn_.DropNextReplies(1);
  };
  MultiLock multi(&loop_, &hooked);
  Result r = Start(multi, {"b", "a"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_TRUE(Held("a"));
  EXPECT_TRUE(Held("b"));  // taken, but nobody knows yet
  loop_.AdvanceTime(absl::Seconds(2));  // b's 2 s command timeout
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(held_at_callback_, ::testing::Not(::testing::Contains("a")));
  // SimpleLock releases the token of its unknown acquire in the background.
  EXPECT_FALSE(Held("a") || Held("b"));
}

TEST_F(MultiLockTest, WorksOverAReadWriteLockView) {
  ReadWriteLock rw(&loop_, &conn_);
  MultiLock readers(&loop_, &rw.reader());
  MultiLock writers(&loop_, &rw.writer());
  Result r1 = Start(readers, {"x", "y"}, Opts(absl::Seconds(10)));
  Result r2 = Start(readers, {"y", "x"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r1, IsOk());
  EXPECT_THAT(*r2, IsOk());
  Result w = Start(writers, {"w", "y"}, Opts(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*w, StatusIs(absl::StatusCode::kAborted));
  EXPECT_FALSE(Held("w"));
}

TEST_F(MultiLockTest, BadInputIsRejectedByTheCall) {
  MultiLock multi(&loop_, &simple_);
  auto cb = [](absl::StatusOr<std::vector<Lease>>) { ADD_FAILURE() << "callback ran"; };
  EXPECT_THAT(multi.Acquire({}, Opts(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(multi.Acquire({"a", "b", "a"}, Opts(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(multi.Acquire({"a", ""}, Opts(absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(multi.Acquire({"a", "b"}, Opts(absl::ZeroDuration()), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(multi.Release({}, [](absl::Status) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.RunUntilIdle();
  EXPECT_FALSE(Held("a"));
}

TEST_F(MultiLockTest, AResourceSetLockIsOneLeaseForTheWholeSet) {
  ResourceSetLock set(&loop_, &simple_, {"b", "a"});
  absl::StatusOr<Lease> lease = absl::UnknownError("pending");
  ASSERT_THAT(set.Acquire("a+b", Opts(absl::Seconds(10)),
                          [&](absl::StatusOr<Lease> l) { lease = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(lease->resource, "a+b");
  EXPECT_TRUE(Held("a") && Held("b"));
  absl::StatusOr<std::vector<Lease>> subs = ResourceSetLock::SubLeases(*lease);
  ASSERT_THAT(subs, IsOk());
  ASSERT_EQ(subs->size(), 2u);
  EXPECT_EQ((*subs)[0].resource, "a");
  EXPECT_EQ((*subs)[0].fence, lease->fence);
  EXPECT_EQ(server_.Execute({"GET", keys_.LockKey("b")}).str, (*subs)[1].token);

  // Renewed together by one watch; losing any member loses the set.
  Watchdog watchdog(&loop_, &set);
  absl::Status lost = absl::OkStatus();
  bool lost_fired = false;
  WatchOptions wo;
  wo.on_lost = [&](absl::Status why) {
    lost_fired = true;
    lost = why;
  };
  ASSERT_THAT(set.Extend(*lease, absl::Milliseconds(300),
                         [&](absl::StatusOr<Lease> l) { lease = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(lease, IsOk());
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*lease, std::move(wo));
  ASSERT_THAT(watch, IsOk());
  for (int i = 0; i < 20; ++i) loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(lost_fired);
  EXPECT_TRUE(Held("a") && Held("b"));
  server_.Execute({"DEL", keys_.LockKey("b")});  // evicted
  for (int i = 0; i < 5; ++i) loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(lost_fired);
  EXPECT_THAT(lost, StatusIs(absl::StatusCode::kFailedPrecondition));

  Lease forged = *lease;
  forged.token = "12:abc";
  EXPECT_THAT(set.Release(forged, [](absl::Status) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(set.Release(*lease, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));  // b was gone
  EXPECT_FALSE(Held("a"));
}

}  // namespace
}  // namespace dlock
