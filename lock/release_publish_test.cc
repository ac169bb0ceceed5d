// Issue 11: a release whose PUBLISH is refused (an ACL user without channel
// permission) has still deleted the key -- Redis scripts do not roll back --
// so it is reported OK, with an observer warning that waiters will not be
// woken. FakeRedis::DenyChannels models the ACL refusal as redis-server
// 7.0.15 words it (tests/differential checks it against a real server;
// tests/lock/acl_real_test.cc runs the same on a real ACL user).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;

struct Recorder : LockObserver {
  void OnRelease(const ReleaseEvent& e) override {
    statuses.push_back(e.status);
    warnings.push_back(std::string(e.warning));
  }
  std::vector<absl::Status> statuses;
  std::vector<std::string> warnings;
};

class ReleasePublishTest : public ::testing::Test {
 protected:
  ReleasePublishTest() : server_(&loop_), conn_(&loop_, &server_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock) {
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    EXPECT_THAT(lock.Acquire("r", o, [&](absl::StatusOr<Lease> l) { out = std::move(l); }),
                IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    absl::Status out = absl::UnknownError("pending");
    EXPECT_THAT(lock.Release(lease, [&](absl::Status s) { out = s; }), IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  KeyScheme keys_;
  Recorder recorder_;
};

TEST_F(ReleasePublishTest, SimpleReleaseWithoutChannelPermissionIsOkWithAWarning) {
  SimpleLockOptions o;
  o.observer = &recorder_;
  SimpleLock lock(&loop_, &conn_, o);
  absl::StatusOr<Lease> lease = AcquireNow(lock);
  ASSERT_THAT(lease, IsOk());
  server_.DenyChannels(true);
  EXPECT_THAT(ReleaseNow(lock, *lease), IsOk());
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  ASSERT_EQ(recorder_.warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(recorder_.warnings[0], "will not be woken"))
      << recorder_.warnings[0];
  EXPECT_TRUE(absl::StrContains(recorder_.warnings[0], "can't publish"))
      << recorder_.warnings[0];
  // With permission, no warning.
  server_.DenyChannels(false);
  lease = AcquireNow(lock);
  ASSERT_THAT(lease, IsOk());
  EXPECT_THAT(ReleaseNow(lock, *lease), IsOk());
  ASSERT_EQ(recorder_.warnings.size(), 2u);
  EXPECT_EQ(recorder_.warnings[1], "");
}

TEST_F(ReleasePublishTest, ReentrantFinalReleaseWithoutChannelPermissionIsOkWithAWarning) {
  ReentrantLockOptions o;
  o.observer = &recorder_;
  ReentrantLock lock(&loop_, &conn_, o);
  absl::StatusOr<Lease> outer = AcquireNow(lock);
  ASSERT_THAT(outer, IsOk());
  absl::StatusOr<Lease> inner = AcquireNow(lock);
  ASSERT_THAT(inner, IsOk());
  server_.DenyChannels(true);
  EXPECT_THAT(ReleaseNow(lock, *inner), IsOk());  // not the last: nothing published
  EXPECT_THAT(ReleaseNow(lock, *outer), IsOk());
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  ASSERT_EQ(recorder_.warnings.size(), 2u);
  EXPECT_EQ(recorder_.warnings[0], "");
  EXPECT_TRUE(absl::StrContains(recorder_.warnings[1], "will not be woken"))
      << recorder_.warnings[1];
}

TEST_F(ReleasePublishTest, ReentrantUndoWithoutChannelPermissionStillUndoes) {
  ReentrantLockOptions o;
  o.command_timeout = absl::Milliseconds(100);
  ReentrantLock lock(&loop_, &conn_, o);
  server_.DenyChannels(true);
  conn_.DropNextReplies(1);
  AcquireOptions a;
  a.ttl = absl::Seconds(10);
  absl::StatusOr<Lease> out = absl::UnknownError("pending");
  ASSERT_THAT(lock.Acquire("r", a, [&](absl::StatusOr<Lease> l) { out = std::move(l); }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));  // it ran
  loop_.AdvanceTime(absl::Milliseconds(100));
  loop_.RunUntilIdle();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));  // undone, publish refused
  // Exactly one undo ran: no retry of a "failed" undo.
  EXPECT_EQ(conn_.CountScriptRuns(ReentrantUndoScript().sha1()), 1);
}

TEST_F(ReleasePublishTest, LockCommandsReleaseSaysWhetherItPublished) {
  LockCommands commands(&conn_, keys_);
  server_.Execute({"SET", keys_.LockKey("r"), "tok", "PX", "10000"});
  server_.DenyChannels(true);
  absl::StatusOr<bool> published = absl::UnknownError("pending");
  std::string why;
  ASSERT_THAT(commands.ReleaseNotifying("r", "tok", absl::Seconds(1),
                                        [&](absl::StatusOr<ReleaseNotice> n) {
                                          if (n.ok()) {
                                            published = n->published;
                                            why = n->publish_error;
                                          } else {
                                            published = n.status();
                                          }
                                        }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(published, IsOk());
  EXPECT_FALSE(*published);
  EXPECT_TRUE(absl::StrContains(why, "can't publish")) << why;
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  // The plain Release (RedLock's) reports OK.
  server_.Execute({"SET", keys_.LockKey("r"), "tok", "PX", "10000"});
  absl::Status plain = absl::UnknownError("pending");
  ASSERT_THAT(commands.Release("r", "tok", absl::Seconds(1), [&](absl::Status s) { plain = s; }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(plain, IsOk());
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

}  // namespace
}  // namespace dlock
