// BlockingClient's ReadLock / WriteLock / MultiLock over FakeTransports on
// a real loop thread (only the server is fake): readers share, a writer
// excludes readers and plain locks, a multi-lock is all-or-nothing and
// releases everything with its guard. A user's unit test as it should be:
// the loop thread is a StdLoopThread, so it links no libuv, hiredis or
// OpenSSL (:rw_multi_client_fake_test_deps_test checks it).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/fake_server_test_base.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/keys.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/std_loop_thread.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

constexpr absl::Duration kTtl = absl::Seconds(10);
constexpr absl::Duration kNoWait = absl::ZeroDuration();

class RwMultiClientFakeTest : public test_support::FakeServerTest<StdLoopThread> {
 protected:
  KeyScheme keys_;
};

TEST_F(RwMultiClientFakeTest, ReadersShareAndAWriterExcludesThemAndPlainLocks) {
  auto a = MustCreate();
  auto b = MustCreate();
  absl::StatusOr<LockGuard> r1 = a->ReadLock("cfg", kTtl, kNoWait);
  absl::StatusOr<LockGuard> r2 = b->ReadLock("cfg", kTtl, kNoWait);
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  EXPECT_THAT(b->WriteLock("cfg", kTtl, kNoWait), StatusIs(absl::StatusCode::kAborted));
  // That writer is now waiting: no new reader.
  EXPECT_THAT(a->ReadLock("cfg", kTtl, kNoWait), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(r1->Unlock(), IsOk());
  EXPECT_THAT(r2->Unlock(), IsOk());
  absl::StatusOr<LockGuard> w = b->WriteLock("cfg", kTtl, absl::Seconds(5));
  ASSERT_THAT(w, IsOk());
  EXPECT_TRUE(w->IsValid());
  EXPECT_THAT(a->TryLock("cfg", kTtl), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(a->ReadLock("cfg", kTtl, kNoWait), StatusIs(absl::StatusCode::kAborted));
}

TEST_F(RwMultiClientFakeTest, AMultiLockIsAllOrNothing) {
  auto a = MustCreate();
  auto b = MustCreate();
  absl::StatusOr<LockGuard> y = b->TryLock("y", kTtl);
  ASSERT_THAT(y, IsOk());
  EXPECT_THAT(a->MultiLock({"y", "x"}, kTtl, kNoWait), StatusIs(absl::StatusCode::kAborted));
  EXPECT_FALSE(KeyExists(keys_.LockKey("x")));
  EXPECT_THAT(a->MultiLock({"y", "x"}, kTtl, absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(KeyExists(keys_.LockKey("x")));
  ASSERT_THAT(y->Unlock(), IsOk());
  {
    absl::StatusOr<MultiLockGuard> both = a->MultiLock({"y", "x"}, kTtl, kNoWait);
    ASSERT_THAT(both, IsOk());
    EXPECT_TRUE(both->IsValid());
    ASSERT_EQ(both->leases().size(), 2u);
    EXPECT_EQ(both->leases()[0].resource, "x");
    EXPECT_EQ(both->leases()[1].resource, "y");
    EXPECT_TRUE(KeyExists(keys_.LockKey("x")) && KeyExists(keys_.LockKey("y")));
  }
  EXPECT_FALSE(KeyExists(keys_.LockKey("x")) || KeyExists(keys_.LockKey("y")));
  EXPECT_THAT(a->MultiLock({"x", "x"}, kTtl, kNoWait),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a->MultiLock({}, kTtl, kNoWait), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RwMultiClientFakeTest, ReadWriteLocksNeedASingleServer) {
  // (RedLock then refuses the servers -- one fake instance thrice -- when
  // it is used; the client refuses read-write locks before that.)
  auto red = MustCreate({}, /*n=*/3);
  EXPECT_THAT(red->ReadLock("cfg", kTtl, kNoWait), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(red->WriteLock("cfg", kTtl, kNoWait), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dlock
