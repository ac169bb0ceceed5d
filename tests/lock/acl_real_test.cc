// Issue 11 on a real redis-server with ACL users:
//   - a user without channel permission (resetchannels): a release deletes
//     the key, is reported OK, and the observer gets a warning that waiters
//     will not be woken (the PUBLISH was refused after the DEL);
//   - a user who may not run EVAL/EVALSHA (NOPERM): a RetryLock with a 10 s
//     wait fails at once with kPermissionDenied after one attempt.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/tests/env/uv_server_test.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

struct Recorder : LockObserver {
  void OnRelease(const ReleaseEvent& e) override {
    warnings.push_back(std::string(e.warning));
  }
  std::vector<std::string> warnings;
};

class AclRealTest : public test_support::UvServerTest {
 protected:
  test_support::RedisServerOptions ServerOptions() override {
    test_support::RedisServerOptions options;
    options.extra_args = {"--user", "nochan", "on", ">pw", "~*", "resetchannels", "+@all",
                          "--user", "noeval", "on", ">pw", "~*", "&*", "+@all", "-eval",
                          "-evalsha"};
    return options;
  }

  Transport* Client(const std::string& user) {
    HiredisTransportOptions options;
    options.port = server_->port();
    options.username = user;
    options.password = "pw";
    return uv_.Hiredis(options);
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, absl::Duration wait = absl::ZeroDuration()) {
    AcquireOptions o;
    o.ttl = absl::Seconds(30);
    o.wait = wait;
    return uv_.Acquire(lock, "r", o, wait + absl::Seconds(30));
  }

  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    return uv_.Release(lock, lease, absl::Seconds(30));
  }

  bool Exists(const std::string& key) {
    absl::StatusOr<Reply> r = server_->Command({"EXISTS", key});
    return r.ok() && *r == Reply::Integer(1);
  }

  KeyScheme keys_;
  Recorder recorder_;
};

TEST_F(AclRealTest, ReleaseWithoutChannelPermissionIsOkWithAWarning) {
  SimpleLockOptions so;
  so.observer = &recorder_;
  SimpleLock simple(uv_.loop(), Client("nochan"), so);
  absl::StatusOr<Lease> lease = AcquireNow(simple);
  ASSERT_THAT(lease, IsOk());
  ASSERT_TRUE(Exists(keys_.LockKey("r")));
  EXPECT_THAT(ReleaseNow(simple, *lease), IsOk());
  EXPECT_FALSE(Exists(keys_.LockKey("r")));
  ASSERT_EQ(recorder_.warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(recorder_.warnings[0], "will not be woken"))
      << recorder_.warnings[0];

  ReentrantLockOptions ro;
  ro.observer = &recorder_;
  ReentrantLock reentrant(uv_.loop(), Client("nochan"), ro);
  lease = AcquireNow(reentrant);
  ASSERT_THAT(lease, IsOk());
  EXPECT_THAT(ReleaseNow(reentrant, *lease), IsOk());
  EXPECT_FALSE(Exists(keys_.LockKey("r")));
  ASSERT_EQ(recorder_.warnings.size(), 2u);
  EXPECT_TRUE(absl::StrContains(recorder_.warnings[1], "will not be woken"))
      << recorder_.warnings[1];
}

// The plain exclusive acquire is a MULTI/EXEC on its common path (no
// EVAL: docs/fences.md), so the reentrant acquire, still a script, is the
// one refused here.
TEST_F(AclRealTest, NopermEndsATenSecondWaitAfterOneAttempt) {
  Transport* conn = Client("noeval");
  ReentrantLock inner(uv_.loop(), conn);
  RetryLock retry(uv_.loop(), &inner);
  absl::StatusOr<Lease> lease = AcquireNow(retry, absl::Seconds(10));
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_TRUE(absl::StrContains(lease.status().message(), "NOPERM")) << lease.status();
  EXPECT_EQ(retry.attempts(), 1);
  EXPECT_FALSE(Exists(keys_.LockKey("r")));
}

}  // namespace
}  // namespace dlock
