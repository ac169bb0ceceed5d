// Issue 11: permanent server errors fail at once, transient ones are
// retried. ErrorReplyStatus (lock_commands.h) maps an error reply to a code;
// RetryLock retries only kAborted / kUnavailable / kDeadlineExceeded, so a
// permanent error (kPermissionDenied, kInternal) ends a wait after one
// attempt. Error texts are redis-server 7.0.15's (an error inside a script
// keeps the failing call's code and gets " script: <sha>, on @user_script:N."
// appended).
#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using Code = absl::StatusCode;

constexpr char kScriptSuffix[] =
    " script: 3b64a469b71295f66c36745e2afb6594ac9aaed3, on @user_script:1.";

TEST(ErrorReplyStatusTest, PermanentAndTransientErrorsGetDistinctCodes) {
  const std::string suffix = kScriptSuffix;
  struct Case {
    std::string error;
    Code code;
  };
  const Case cases[] = {
      // Permission: permanent.
      {"NOPERM this user has no permissions to run the 'evalsha' command",
       Code::kPermissionDenied},
      {"NOPERM this user has no permissions to access one of the keys used as arguments",
       Code::kPermissionDenied},
      {"NOAUTH Authentication required.", Code::kPermissionDenied},
      {"ERR Protocol error: unauthenticated multibulk length", Code::kPermissionDenied},
      {"WRONGPASS invalid username-password pair or user is disabled.",
       Code::kPermissionDenied},
      {"ERR The user executing the script can't access at least one of the keys "
       "mentioned in the command" + suffix,
       Code::kPermissionDenied},
      // Foreign data and script/command errors: permanent.
      {"WRONGTYPE Operation against a key holding the wrong kind of value" + suffix,
       Code::kInternal},
      {"ERR value is not an integer or out of range" + suffix, Code::kInternal},
      {"ERR increment or decrement would overflow" + suffix, Code::kInternal},
      {"ERR unknown command 'evalsha', with args beginning with: ", Code::kInternal},
      {"ERR Unknown Redis command called from script" + suffix, Code::kInternal},
      {"ERR user_script:1: boom" + suffix, Code::kInternal},
      {"ERR Error running script (call to f_x): @user_script:1: oops", Code::kInternal},
      {"SOMETHINGNEW we have never seen", Code::kInternal},
      // Transient: retried.
      {"READONLY You can't write against a read only replica." + suffix,
       Code::kUnavailable},
      {"READONLY You can't write against a read only replica.", Code::kUnavailable},
      {"OOM command not allowed when used memory > 'maxmemory'." + suffix,
       Code::kUnavailable},
      {"LOADING Redis is loading the dataset in memory", Code::kUnavailable},
      {"BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
       "SHUTDOWN NOSAVE.",
       Code::kUnavailable},
      {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
       Code::kUnavailable},
      {"TRYAGAIN Multiple keys request during rehashing of slot", Code::kUnavailable},
      {"CLUSTERDOWN The cluster is down", Code::kUnavailable},
      {"NOREPLICAS Not enough good replicas to write.", Code::kUnavailable},
      {"MISCONF Redis is configured to save RDB snapshots, but it's currently unable "
       "to persist to disk.",
       Code::kUnavailable},
      {"ERR max number of clients reached", Code::kUnavailable},
  };
  for (const Case& c : cases) {
    absl::Status s = ErrorReplyStatus(Reply::Error(c.error));
    EXPECT_EQ(s.code(), c.code) << c.error << " -> " << s;
    EXPECT_NE(s.message().find(c.error), absl::string_view::npos) << s;
  }
  // The fence counter at int64 max says so.
  absl::Status overflow = ErrorReplyStatus(
      Reply::Error("ERR increment or decrement would overflow" + suffix));
  EXPECT_NE(overflow.message().find("fencing counter"), absl::string_view::npos) << overflow;
}

AcquireOptions Wait(absl::Duration ttl, absl::Duration wait) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

class PermanentErrorTest : public ::testing::Test {
 protected:
  PermanentErrorTest()
      : server_(&loop_), holder_conn_(&loop_, &server_), conn_(&loop_, &server_),
        holder_(&loop_, &holder_conn_), inner_(&loop_, &conn_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
  }

  std::shared_ptr<absl::StatusOr<Lease>> Start(RetryLock& lock, AcquireOptions options) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    EXPECT_THAT(lock.Acquire("r", options,
                             [out](absl::StatusOr<Lease> r) { *out = std::move(r); }),
                IsOk());
    return out;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport holder_conn_;
  FakeTransport conn_;
  SimpleLock holder_;
  SimpleLock inner_;
  KeyScheme keys_;
};

TEST_F(PermanentErrorTest, NopermEndsATenSecondWaitAtOnceAfterOneAttempt) {
  RetryLock lock(&loop_, &inner_);
  conn_.FailNextWithReply(
      1000, Reply::Error("NOPERM this user has no permissions to run the 'evalsha' command"));
  const absl::Time start = loop_.Now();
  auto r = Start(lock, Wait(absl::Seconds(5), absl::Seconds(10)));
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(*r, StatusIs(Code::kPermissionDenied));
  EXPECT_EQ(lock.attempts(), 1);
  EXPECT_EQ(lock.waiting(), 0u);
  EXPECT_EQ(conn_.CountSent("EXEC"), 1);  // the acquire's transaction
  EXPECT_LE(loop_.Now() - start, absl::Milliseconds(1));
}

TEST_F(PermanentErrorTest, TransientErrorsKeepRetryingUntilTheLockIsFree) {
  for (const char* error :
       {"READONLY You can't write against a read only replica.",
        "LOADING Redis is loading the dataset in memory"}) {
    SCOPED_TRACE(error);
    RetryLockOptions o;
    o.initial_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(100);
    RetryLock lock(&loop_, &inner_, o);
    // Another process holds it for 1 s; meanwhile our server fails over.
    absl::StatusOr<Lease> held = absl::UnknownError("pending");
    ASSERT_THAT(holder_.Acquire("r", Wait(absl::Seconds(1), absl::ZeroDuration()),
                                [&](absl::StatusOr<Lease> l) { held = std::move(l); }),
                IsOk());
    loop_.RunUntilIdle();
    ASSERT_THAT(held, IsOk());
    conn_.FailNextWithReply(5, Reply::Error(error));
    auto r = Start(lock, Wait(absl::Seconds(5), absl::Seconds(10)));
    loop_.AdvanceTime(absl::Seconds(3));
    ASSERT_THAT(*r, IsOk());
    EXPECT_GT(lock.attempts(), 3);
    EXPECT_EQ(server_.GetString(keys_.LockKey("r")), (*r)->token);
    absl::Status released = absl::UnknownError("pending");
    ASSERT_THAT(lock.Release(**r, [&](absl::Status s) { released = s; }), IsOk());
    loop_.RunUntilIdle();
    ASSERT_THAT(released, IsOk());
  }
}

}  // namespace
}  // namespace dlock
