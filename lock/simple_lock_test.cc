// SimpleLock and LockCommands on FakeRedis in virtual time: exact deadline
// arithmetic, unknown outcomes (dropped requests/replies, timeouts, late
// replies, cancel after send), reply mapping, and observer events.
#include "dlock/lock/simple_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/scripts.h"
#include "dlock/testing/acquire_result.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::Pending;
using ::dlock::test_support::StartAcquire;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

AcquireOptions Ttl(absl::Duration ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

class SimpleLockTest : public ::testing::Test {
 protected:
  SimpleLockTest() : server_(&loop_), conn_(&loop_, &server_), other_(&loop_, &server_) {
    // A warm server: every script cached, so each primitive is one round
    // trip on the server (a cold connection sends SCRIPT LOAD before a
    // script's first EVALSHA; see WorksAfterAServerRestartEmptiedTheScriptCache).
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    // A never-used server declared trusted: fences start at 1.
    server_.Execute(TrustDataSetCommand(KeyScheme{}));
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  FakeTransport other_;
  KeyScheme keys_;
};

TEST_F(SimpleLockTest, DeadlineIsSendTimePlusTtlMinusDriftNotReplyTime) {
  conn_.SetLatency(absl::Milliseconds(40));
  SimpleLock lock(&loop_, &conn_);
  const absl::Time sent = loop_.Now();
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.AdvanceTime(absl::Milliseconds(40));
  ASSERT_THAT(*r, IsOk());
  // 10 s - (10 s * 0.01 + 2 ms), from the send time.
  EXPECT_EQ((*r)->deadline, sent + absl::Seconds(10) - absl::Milliseconds(102));
  EXPECT_EQ((*r)->ttl, absl::Seconds(10));
}

TEST_F(SimpleLockTest, DriftOptionsAreHonoured) {
  SimpleLockOptions options;
  options.drift_factor = 0.1;
  options.drift_constant = absl::Milliseconds(5);
  SimpleLock lock(&loop_, &conn_, options);
  const absl::Time sent = loop_.Now();
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(1)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_EQ((*r)->deadline, sent + absl::Seconds(1) - absl::Milliseconds(105));
  // A ttl not above its own drift allowance is useless and rejected.
  EXPECT_THAT(lock.Acquire("r2", Ttl(absl::Milliseconds(5)), [](absl::StatusOr<Lease>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(SimpleLockTest, SubMillisecondTtlIsTruncatedToWholeMilliseconds) {
  SimpleLock lock(&loop_, &conn_);
  auto r = StartAcquire(lock, "r", Ttl(absl::Microseconds(10500)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_EQ((*r)->ttl, absl::Milliseconds(10));
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 10);
}

TEST_F(SimpleLockTest, ExtendDeadlineCountsFromWhenTheExtendWasSent) {
  conn_.SetLatency(absl::Milliseconds(20));
  SimpleLock lock(&loop_, &conn_);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.AdvanceTime(absl::Seconds(3));
  ASSERT_THAT(*r, IsOk());
  const absl::Time sent = loop_.Now();
  absl::StatusOr<Lease> ext = absl::UnknownError("pending");
  ASSERT_THAT(lock.Extend(**r, absl::Seconds(4), [&](absl::StatusOr<Lease> l) { ext = l; }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_THAT(ext, IsOk());
  EXPECT_EQ(ext->deadline, sent + absl::Seconds(4) - absl::Milliseconds(42));
  // Applied at sent + 10 ms with PX 4000: 3990 ms left 10 ms later.
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 3990);
}

TEST_F(SimpleLockTest, DroppedAcquireReplyTimesOutAndLeavesNoKeyBehind) {
  SimpleLockOptions options;
  options.command_timeout = absl::Milliseconds(500);
  SimpleLock lock(&loop_, &conn_, options);
  conn_.DropNextReplies(1);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  // The SET ran on the server; the client never heard.
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  loop_.AdvanceTime(absl::Milliseconds(500));
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.RunUntilIdle();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  EXPECT_EQ(conn_.CountScriptRuns(ReleaseScript().sha1()), 1);
}

TEST_F(SimpleLockTest, DroppedAcquireRequestTimesOutAndTouchesNothing) {
  SimpleLockOptions options;
  options.command_timeout = absl::Milliseconds(500);
  SimpleLock lock(&loop_, &conn_, options);
  conn_.DropNextRequests(1);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(500));
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_EQ(server_.Keys(), std::vector<std::string>{keys_.DataSetKey()});
}

TEST_F(SimpleLockTest, ReplyArrivingAfterTheLeaseDeadlineIsRefusedAndReleased) {
  conn_.SetLatency(absl::Milliseconds(1), absl::Milliseconds(150));
  SimpleLock lock(&loop_, &conn_);
  auto r = StartAcquire(lock, "r", Ttl(absl::Milliseconds(300)));
  loop_.AdvanceTime(absl::Milliseconds(151));
  EXPECT_THAT(*r, IsOk());  // deadline is 300 - 5 ms: still usable at 151 ms

  SimpleLock late(&loop_, &other_);
  other_.SetLatency(absl::Milliseconds(1), absl::Milliseconds(400));
  auto r2 = StartAcquire(late, "r2", Ttl(absl::Milliseconds(300)));
  loop_.AdvanceTime(absl::Milliseconds(401));
  EXPECT_THAT(*r2, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(other_.CountScriptRuns(ReleaseScript().sha1()), 1);
}

TEST_F(SimpleLockTest, CancelAfterSendReleasesTheKeyItTookAndNeverCallsBack) {
  conn_.SetLatency(absl::Milliseconds(10));
  SimpleLock lock(&loop_, &conn_);
  AcquireHandle handle;
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)), &handle);
  loop_.AdvanceTime(absl::Milliseconds(5));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));  // applied
  EXPECT_TRUE(handle.Cancel());
  EXPECT_FALSE(handle.Cancel());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_TRUE(Pending(r));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

TEST_F(SimpleLockTest, CancelAfterTheCallbackRanReturnsFalse) {
  SimpleLock lock(&loop_, &conn_);
  AcquireHandle handle;
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)), &handle);
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_FALSE(handle.Cancel());
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  EXPECT_FALSE(AcquireHandle().Cancel());
}

TEST_F(SimpleLockTest, CleanupIsRetriedWhileTheServerIsUnreachable) {
  SimpleLockOptions options;
  options.command_timeout = absl::Milliseconds(50);
  SimpleLock lock(&loop_, &conn_, options);
  conn_.DropNextReplies(1);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  // The connection drops with the reply outstanding: unknown outcome.
  conn_.Partition();
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  // The first cleanup fails (partitioned); it is retried after 100 ms.
  loop_.AdvanceTime(absl::Milliseconds(50));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  conn_.Heal();
  loop_.AdvanceTime(absl::Milliseconds(150));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

// Issue 22's last ghost: a release whose request timed out on the client
// met NOSCRIPT (SCRIPT FLUSH) with a later command already written behind
// it, so the transport could not re-send it in order and nobody heard its
// "did not run". The lock sends the release again after the unknown
// outcome: the key is gone long before its TTL.
TEST_F(SimpleLockTest, AReleaseThatTimedOutAndNeverRanIsSentAgain) {
  SimpleLockOptions options;
  options.command_timeout = absl::Milliseconds(200);
  SimpleLock lock(&loop_, &conn_, options);
  // Both scripts known loaded on the connection (a release ran on it).
  auto warm = StartAcquire(lock, "warm", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*warm, IsOk());
  ASSERT_THAT(lock.Release(**warm, [](absl::Status) {}), IsOk());
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  server_.Execute({"SCRIPT", "FLUSH"});
  conn_.SetLatency(absl::Milliseconds(300));  // beyond the command timeout
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(**r, [&](absl::Status s) { released = s; }), IsOk());
  auto behind = StartAcquire(lock, "other", Ttl(absl::Seconds(30)));
  loop_.AdvanceTime(absl::Milliseconds(250));
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kDeadlineExceeded));
  loop_.AdvanceTime(absl::Seconds(3));
  for (const auto& e : server_.log()) { if (!e.from_script) std::printf("LOG %lld %llu %s %s %s\n", (long long)e.time_ms, (unsigned long long)e.session_id, e.argv[0].c_str(), e.argv.size()>1?e.argv[1].substr(0,12).c_str():"", e.argv.size()>3?e.argv[3].c_str():""); }
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")))
      << "the released key stays until its TTL: a ghost";
}

TEST_F(SimpleLockTest, DestroyingTheLockStopsCleanupRetriesSoTheTransportMayGo) {
  auto transport = std::make_unique<FakeTransport>(&loop_, &server_);
  auto lock = std::make_unique<SimpleLock>(&loop_, transport.get());
  transport->DropNextReplies(1);
  auto r = StartAcquire(*lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  transport->Partition();
  loop_.RunUntilIdle();  // acquire fails, first cleanup fails: retry pending
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  lock.reset();
  transport.reset();
  loop_.AdvanceTime(absl::Seconds(1));  // no retry touches the dead transport
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
  loop_.AdvanceTime(absl::Seconds(30));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));  // expired by its TTL
}

TEST_F(SimpleLockTest, ConnectionDownIsUnavailable) {
  SimpleLock lock(&loop_, &conn_);
  conn_.Partition();
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(server_.Keys(), std::vector<std::string>{keys_.DataSetKey()});
}

TEST_F(SimpleLockTest, ErrorRepliesMapToUnavailableAndForeignDataToInternal) {
  SimpleLock lock(&loop_, &conn_);
  conn_.FailNextWithReply(1, Reply::Error("OOM command not allowed when used memory > 'maxmemory'"));
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));

  // A fence mark holding something that is not a counter: nothing is taken.
  server_.Execute({"HSET", keys_.FenceHwmKey(), "x", "y"});
  r = StartAcquire(lock, "f", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("f")));
  server_.Execute({"SET", keys_.FenceHwmKey(), "not-a-number"});
  r = StartAcquire(lock, "g", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("g")));
  server_.Execute({"DEL", keys_.FenceHwmKey()});

  // A reply of a shape the script never produces.
  conn_.FailNextWithReply(1, Reply::String("surprise"));
  r = StartAcquire(lock, "h", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal));
}

// A string with a TTL is another holder's lock (kAborted), and so is a
// string with no TTL on the transaction path; another type is foreign data
// (kInternal, DESIGN.md's error table); left untouched either way.
TEST_F(SimpleLockTest, ForeignDataUnderTheLockKeyIsInternalAndLeftAlone) {
  SimpleLock lock(&loop_, &conn_);
  server_.Execute({"SET", keys_.LockKey("r"), "not-ours", "PX", "60000"});
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.GetString(keys_.LockKey("r")), "not-ours");

  // The acquire's transaction (docs/fences.md) cannot ask PTTL: a string
  // with no TTL reads as held.
  server_.Execute({"SET", keys_.LockKey("r"), "not-ours"});
  r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.GetString(keys_.LockKey("r")), "not-ours");
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), -1);

  server_.Execute({"DEL", keys_.LockKey("r")});
  server_.Execute({"HSET", keys_.LockKey("r"), "f", "v"});
  server_.Execute({"PEXPIRE", keys_.LockKey("r"), "60000"});
  r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal,
                           HasSubstr("foreign data under the lock key dlock:{r}")));
  EXPECT_TRUE(server_.GetHash(keys_.LockKey("r")).has_value());
}

TEST_F(SimpleLockTest, WorksAfterAServerRestartEmptiedTheScriptCache) {
  SimpleLock lock(&loop_, &conn_);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  server_.Restart();
  ASSERT_TRUE(server_.CachedScripts().empty());
  conn_.ClearSent();
  r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_EQ(conn_.CountSent("EVALSHA"), 1);
  // The restart made a new connection, which loads the script right before
  // its EVALSHA (transport.h): no NOSCRIPT, no EVAL a round trip later.
  EXPECT_EQ(conn_.CountSent("SCRIPT"), 1);
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
}

TEST_F(SimpleLockTest, KeyPrefixIsConfigurable) {
  SimpleLockOptions options;
  options.key_prefix = "app:locks:";
  SimpleLock lock(&loop_, &conn_, options);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  // The data-set marker is per prefix (the fixture trusted "dlock:"'s).
  EXPECT_EQ(server_.Keys(), (std::vector<std::string>{"app:locks:data-set-began",
                                                      "app:locks:fence-hwm", "app:locks:{r}",
                                                      "dlock:data-set-began"}));
  EXPECT_EQ(lock.keys().prefix, "app:locks:");
}

TEST_F(SimpleLockTest, OperationsInFlightCompleteAfterTheLockIsDestroyed) {
  conn_.SetLatency(absl::Milliseconds(10));
  auto lock = std::make_unique<SimpleLock>(&loop_, &conn_);
  auto r = StartAcquire(*lock, "r", Ttl(absl::Seconds(30)));
  lock.reset();
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*r, IsOk());
}

TEST_F(SimpleLockTest, ReleasePublishesTheReleasedTokenOnTheResourceChannel) {
  SimpleLock lock(&loop_, &conn_);
  std::vector<std::string> messages;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = other_.Subscribe(
      keys_.ChannelKey("r"),
      [&](absl::string_view, absl::string_view m) { messages.emplace_back(m); },
      [](absl::Status) {});
  ASSERT_THAT(sub, IsOk());
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(**r, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, IsOk());
  EXPECT_EQ(messages, std::vector<std::string>{(*r)->token});
  // A failed release publishes nothing.
  ASSERT_THAT(lock.Release(**r, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(messages.size(), 1u);
}

class RecordingObserver : public LockObserver {
 public:
  void OnAcquire(const AcquireEvent& e) override {
    acquires.push_back(std::string(e.policy) + " " + e.status.ToString());
  }
  void OnRelease(const ReleaseEvent& e) override {
    releases.push_back(std::string(e.policy) + " " + e.status.ToString());
  }
  void OnExtend(const ExtendEvent& e) override {
    extends.push_back(std::string(e.policy) + " " + e.status.ToString());
  }
  std::vector<std::string> acquires, releases, extends;
};

TEST_F(SimpleLockTest, ObserverSeesEveryOutcome) {
  RecordingObserver observer;
  SimpleLockOptions options;
  options.observer = &observer;
  SimpleLock lock(&loop_, &conn_, options);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  auto busy = StartAcquire(lock, "r", Ttl(absl::Seconds(30)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  ASSERT_THAT(lock.Extend(**r, absl::Seconds(5), [](absl::StatusOr<Lease>) {}), IsOk());
  ASSERT_THAT(lock.Release(**r, [](absl::Status) {}), IsOk());
  loop_.RunUntilIdle();
  ASSERT_EQ(observer.acquires.size(), 2u);
  EXPECT_EQ(observer.acquires[0], "simple OK");
  EXPECT_THAT(observer.acquires[1], ::testing::StartsWith("simple ABORTED"));
  EXPECT_EQ(observer.extends, std::vector<std::string>{"simple OK"});
  EXPECT_EQ(observer.releases, std::vector<std::string>{"simple OK"});
}

// ---- LockCommands -----------------------------------------------------

class LockCommandsTest : public SimpleLockTest {
 protected:
  template <typename T>
  T Run(absl::AnyInvocable<absl::Status(absl::AnyInvocable<void(T) &&>)> start) {
    T out = absl::UnknownError("pending");
    EXPECT_THAT(start([&out](T v) { out = std::move(v); }), IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  LockCommands commands_{&conn_, KeyScheme{}};
};

TEST_F(LockCommandsTest, TryAcquireIncrementsTheFenceAndAbortsWhenHeld) {
  absl::StatusOr<int64_t> f1 = Run<absl::StatusOr<int64_t>>([&](auto cb) {
    return commands_.TryAcquire("r", "tok", absl::Seconds(10), absl::Seconds(1), std::move(cb));
  });
  EXPECT_THAT(f1, ::dlock::test_support::IsOkAndHolds(1));
  absl::StatusOr<int64_t> again = Run<absl::StatusOr<int64_t>>([&](auto cb) {
    return commands_.TryAcquire("r", "tok", absl::Seconds(10), absl::Seconds(1), std::move(cb));
  });
  EXPECT_THAT(again, StatusIs(absl::StatusCode::kAborted));
  // The server's fence mark: the refused transaction's INCR stays (fences
  // need only rise; docs/fences.md).
  EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()), "2");
}

TEST_F(LockCommandsTest, ExtendOrReacquireExtendsOwnReSetsMissingAndSparesOthers) {
  auto eor = [&](absl::string_view token) {
    return Run<absl::Status>([&](auto cb) {
      return commands_.ExtendOrReacquire("r", token, absl::Seconds(7), absl::Seconds(1),
                                         std::move(cb));
    });
  };
  EXPECT_THAT(eor("mine"), IsOk());  // missing: set
  EXPECT_EQ(server_.GetString(keys_.LockKey("r")), "mine");
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 7000);
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_THAT(eor("mine"), IsOk());  // own: extended
  EXPECT_EQ(server_.PTtl(keys_.LockKey("r")), 7000);
  EXPECT_THAT(eor("theirs"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(server_.GetString(keys_.LockKey("r")), "mine");
  // Never touches the fence.
  EXPECT_FALSE(server_.Exists(keys_.FenceHwmKey()));
}

TEST_F(LockCommandsTest, ValidatesEveryArgument) {
  auto cb = [](absl::Status) {};
  EXPECT_THAT(commands_.Release("", "t", absl::Seconds(1), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(commands_.Release("r", "", absl::Seconds(1), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(commands_.Release("r", "t", absl::ZeroDuration(), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(commands_.Extend("r", "t", absl::Microseconds(999), absl::Seconds(1), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(commands_.ExtendOrReacquire("r", "t", kMaxTtl + absl::Seconds(1),
                                          absl::Seconds(1), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTtl(kMinTtl), IsOk());
  EXPECT_THAT(ValidateTtl(kMaxTtl), IsOk());
  EXPECT_THAT(ValidateResource(std::string(kMaxResourceLength, '\0')), IsOk());
  EXPECT_EQ(conn_.sent().size(), 0u);
}

TEST(KeySchemeTest, AllKeysOfAResourceShareOneHashTag) {
  KeyScheme keys{"p:"};
  EXPECT_EQ(keys.LockKey("orders/42"), "p:{orders/42}");
  EXPECT_EQ(keys.FenceKey("orders/42"), "p:{orders/42}:fence");
  EXPECT_EQ(keys.ChannelKey("orders/42"), "p:{orders/42}:released");
}

TEST(NewTokenTest, TokensAre128BitHexAndNeverRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    std::string t = NewToken();
    ASSERT_EQ(t.size(), 32u);
    ASSERT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(std::move(t));
  }
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(NewTokenTest, ForkedChildNeverRepeatsItsParentsTokens) {
  // Fill this thread's token buffer, then fork: the child gets a copy of the
  // buffer and must not hand out the tokens the parent hands out next.
  NewToken();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string t;
    for (int i = 0; i < 8; ++i) t += NewToken();
    const ssize_t n = write(fds[1], t.data(), t.size());
    _exit(n == static_cast<ssize_t>(t.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string parent;
  for (int i = 0; i < 8; ++i) parent += NewToken();
  std::string child(8 * 32, '\0');
  size_t got = 0;
  while (got < child.size()) {
    const ssize_t n = read(fds[0], &child[got], child.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, child.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < 8; ++i) {
    seen.insert(parent.substr(32 * i, 32));
    seen.insert(child.substr(32 * i, 32));
  }
  EXPECT_EQ(seen.size(), 16u);
}

TEST(NewTokenTest, ThreadsNeverShareTokens) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<std::string>> out(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&out, t] {
      for (int i = 0; i < kPerThread; ++i) out[t].push_back(NewToken());
    });
  }
  for (std::thread& th : threads) th.join();
  std::set<std::string> seen;
  for (const auto& v : out) seen.insert(v.begin(), v.end());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
}

// ------------------------------------------------- data-set marker (issue 11)

// SimpleLockOptions::restart_window: a single server whose data set began
// less than the window ago refuses; it grants exactly when the window ends.
TEST_F(SimpleLockTest, RestartWindowRefusesAYoungServerUntilItEnds) {
  SimpleLockOptions options;
  options.restart_window = absl::Seconds(30);
  SimpleLock guarded(&loop_, &conn_, options);
  SimpleLock plain(&loop_, &other_);
  server_.Execute({"FLUSHALL"});  // data lost: the marker is gone
  const absl::Time first_contact = loop_.Now();
  auto r = StartAcquire(guarded, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable,
                           HasSubstr("data set began 0 ms ago")));
  EXPECT_TRUE(IsYoungDataSet(r->status()));
  EXPECT_EQ(YoungDataSetTimeLeft(r->status()), absl::Seconds(30));
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  loop_.AdvanceTo(first_contact + absl::Seconds(30) - absl::Milliseconds(1));
  r = StartAcquire(guarded, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("young, 1 ms left")));
  loop_.AdvanceTo(first_contact + absl::Seconds(30));
  r = StartAcquire(guarded, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  server_.Execute({"DEL", keys_.LockKey("r")});

  // Off by default: a young server grants at once.
  server_.Execute({"FLUSHALL"});
  r = StartAcquire(plain, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, IsOk());
}

// Fences never go backwards across a restart that lost the data: the fence
// key starts at (when the new data set began, ms) x 1000.
TEST_F(SimpleLockTest, FenceAfterADataLossRestartIsAboveTheOldOne) {
  SimpleLock lock(&loop_, &conn_);
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_EQ((*r)->fence, 1);
  const int64_t old_fence = (*r)->fence;
  server_.Restart();
  loop_.AdvanceTime(absl::Milliseconds(5));
  r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_GT((*r)->fence, old_fence);
  EXPECT_EQ((*r)->fence, server_.NowMs() * 1000 + 1);
}

TEST_F(SimpleLockTest, AnExhaustedFenceCounterIsInternalAndTakesNothing) {
  SimpleLock lock(&loop_, &conn_);
  for (const char* value : {"9223372036854775807", "9007199254740991"}) {
    server_.Execute({"SET", keys_.FenceHwmKey(), value});
    auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
    loop_.RunUntilIdle();
    EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal,
                             HasSubstr("fencing counter dlock:fence-hwm is exhausted")));
    EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
    // The transaction's INCR stays where it could add one (still exhausted).
    EXPECT_EQ(server_.GetString(keys_.FenceHwmKey()),
              std::string(value) == "9007199254740991" ? "9007199254740992" : value);
  }
  // One below the last exact integer still works.
  server_.Execute({"SET", keys_.FenceHwmKey(), "9007199254740989"});
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, ::dlock::test_support::IsOkAndHolds(::testing::Field(&Lease::fence, 9007199254740990)));
}

TEST_F(SimpleLockTest, AMarkerThatIsNotATimeIsForeignData) {
  SimpleLock lock(&loop_, &conn_);
  server_.Execute({"SET", keys_.DataSetKey(), "yesterday"});
  auto r = StartAcquire(lock, "r", Ttl(absl::Seconds(10)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kInternal,
                           HasSubstr("foreign data under the data-set marker key")));
}

TEST_F(LockCommandsTest, TrustDataSetMakesAYoungServerGrantAtOnceWithFencesFromOne) {
  server_.Execute({"FLUSHALL"});
  absl::StatusOr<int64_t> young = Run<absl::StatusOr<int64_t>>([&](auto cb) {
    return commands_.TryAcquire("r", "tok", absl::Seconds(10), absl::Seconds(30),
                                absl::Seconds(1), std::move(cb));
  });
  EXPECT_TRUE(IsYoungDataSet(young.status())) << young.status();
  absl::Status trusted = Run<absl::Status>(
      [&](auto cb) { return commands_.TrustDataSet(absl::Seconds(1), std::move(cb)); });
  EXPECT_THAT(trusted, IsOk());
  EXPECT_EQ(server_.GetString(keys_.DataSetKey()), "0");
  absl::StatusOr<int64_t> granted = Run<absl::StatusOr<int64_t>>([&](auto cb) {
    return commands_.TryAcquire("r", "tok", absl::Seconds(10), absl::Seconds(30),
                                absl::Seconds(1), std::move(cb));
  });
  EXPECT_THAT(granted, ::dlock::test_support::IsOkAndHolds(1));
}

}  // namespace
}  // namespace dlock
