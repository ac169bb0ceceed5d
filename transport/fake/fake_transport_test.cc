#include "dlock/transport/fake/fake_transport.h"

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"
#include "dlock/transport/uv/uv_loop_thread.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr absl::Duration kTimeout = absl::Seconds(1);

// Collects the outcome of one command.
struct Outcome {
  std::optional<absl::StatusOr<Reply>> result;
  absl::Time at;
  int calls = 0;
};

int64_t CountLogged(const FakeRedis& server, absl::string_view command) {
  int64_t n = 0;
  for (const FakeRedis::LogEntry& e : server.log()) n += absl::EqualsIgnoreCase(e.argv[0], command);
  return n;
}

class FakeTransportTest : public ::testing::Test {
 protected:
  // Sends and records the outcome (and when it arrived) in `out`.
  void SendTo(FakeTransport& t, std::vector<std::string> argv, Outcome* out,
              absl::Duration timeout = kTimeout) {
    EXPECT_THAT(TrySend(t, std::move(argv), out, timeout), IsOk());
  }
  absl::Status TrySend(FakeTransport& t, std::vector<std::string> argv, Outcome* out,
                       absl::Duration timeout = kTimeout) {
    return t.Send(std::move(argv), timeout, [this, out](absl::StatusOr<Reply> r) {
      out->result = std::move(r);
      out->at = loop_.Now();
      ++out->calls;
    });
  }
  absl::Duration Since(absl::Time start, const Outcome& o) { return o.at - start; }

  ManualEventLoop loop_;
  FakeRedis server_{&loop_};
  FakeTransport conn_{&loop_, &server_};
};

TEST_F(FakeTransportTest, CallbackRunsOnTheLoopNeverInsideSend) {
  Outcome out;
  ASSERT_THAT(TrySend(conn_, {"SET", "k", "v"}, &out), IsOk());
  EXPECT_EQ(out.calls, 0);
  EXPECT_FALSE(server_.Exists("k"));  // not applied inside Send either
  loop_.RunUntilIdle();
  EXPECT_EQ(out.calls, 1);
  EXPECT_THAT(*out.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_EQ(conn_.pending_commands(), 0u);
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(out.calls, 1);  // exactly once: the timeout never fires afterwards
}

TEST_F(FakeTransportTest, TransactionRunsAtomicallyAndIsLoggedAsMultiExec) {
  FakeTransport other(&loop_, &server_);
  // The transaction's request is slower than the other connection's INCR,
  // sent at the same time; the other INCR is applied before the group, and
  // nothing comes between the group's commands.
  conn_.SetLatency(absl::Milliseconds(2), absl::Milliseconds(1));
  other.SetLatency(absl::Milliseconds(1), absl::Milliseconds(1));
  std::optional<absl::StatusOr<Reply>> tx;
  const absl::string_view incr[] = {"INCR", "n"};
  const absl::string_view get[] = {"GET", "n"};
  const absl::Span<const absl::string_view> group[] = {incr, incr, get};
  ASSERT_THAT(conn_.SendTransaction(group, kTimeout,
                                    [&](absl::StatusOr<Reply> r) { tx = std::move(r); }),
              IsOk());
  Outcome out;
  SendTo(other, {"INCR", "n"}, &out);
  loop_.RunUntilIdle();
  EXPECT_FALSE(tx.has_value());  // never inside the call, nor before the latency
  loop_.AdvanceTime(absl::Milliseconds(3));
  ASSERT_TRUE(tx.has_value());
  ASSERT_THAT(*tx, IsOk());
  EXPECT_EQ(**tx, Reply::Array({Reply::Integer(2), Reply::Integer(3), Reply::String("3")}));
  EXPECT_EQ(conn_.CountSent("MULTI"), 1);
  EXPECT_EQ(conn_.CountSent("EXEC"), 1);
  EXPECT_EQ(conn_.CountSent("INCR"), 2);
  EXPECT_EQ(CountLogged(server_, "EXEC"), 1);

  // One fate for the group: FailNext(1) fails it whole, nothing applied.
  conn_.FailNext(1, absl::UnavailableError("down"));
  tx.reset();
  ASSERT_THAT(conn_.SendTransaction(group, kTimeout,
                                    [&](absl::StatusOr<Reply> r) { tx = std::move(r); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(5));
  ASSERT_TRUE(tx.has_value());
  EXPECT_THAT(*tx, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(server_.GetString("n"), std::optional<std::string>("3"));

  // A queuing error aborts the group on the server: EXECABORT, nothing ran.
  const absl::string_view bad[] = {"GET"};
  const absl::Span<const absl::string_view> aborted[] = {incr, bad};
  tx.reset();
  ASSERT_THAT(conn_.SendTransaction(aborted, kTimeout,
                                    [&](absl::StatusOr<Reply> r) { tx = std::move(r); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(5));
  ASSERT_TRUE(tx.has_value());
  ASSERT_THAT(*tx, IsOk());
  EXPECT_TRUE((*tx)->IsErrorWithPrefix("EXECABORT"));
  EXPECT_EQ(server_.GetString("n"), std::optional<std::string>("3"));

  // Rejected at once.
  const absl::string_view exec[] = {"exec"};
  const absl::Span<const absl::string_view> nested[] = {exec};
  EXPECT_THAT(conn_.SendTransaction({}, kTimeout, [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn_.SendTransaction(nested, kTimeout, [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn_.SendTransaction(group, absl::ZeroDuration(), [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(FakeTransportTest, CloseCancelsAPendingTransaction) {
  std::optional<absl::StatusOr<Reply>> tx;
  const absl::string_view incr[] = {"INCR", "n"};
  const absl::Span<const absl::string_view> group[] = {incr};
  ASSERT_THAT(conn_.SendTransaction(group, kTimeout,
                                    [&](absl::StatusOr<Reply> r) { tx = std::move(r); }),
              IsOk());
  conn_.Close();
  ASSERT_TRUE(tx.has_value());
  EXPECT_THAT(*tx, StatusIs(absl::StatusCode::kCancelled));
  loop_.RunUntilIdle();
  EXPECT_FALSE(server_.Exists("n"));
}

TEST_F(FakeTransportTest, ErrorRepliesAreRepliesNotStatuses) {
  Outcome out;
  SendTo(conn_, {"EVALSHA", std::string(40, 'a'), "0"}, &out);
  loop_.RunUntilIdle();
  ASSERT_THAT(*out.result, IsOk());
  EXPECT_TRUE(out.result->value().IsErrorWithPrefix("NOSCRIPT"));
}

TEST_F(FakeTransportTest, PipelinedCommandsAreAnsweredInOrder) {
  std::vector<std::string> order;
  for (int i = 0; i < 5; ++i) {
    ASSERT_THAT(conn_.Send({"INCR", "n"}, kTimeout,
                           [&order](absl::StatusOr<Reply> r) { order.push_back(r->DebugString()); }),
                IsOk());
  }
  loop_.RunUntilIdle();
  EXPECT_THAT(order, ElementsAre("(integer) 1", "(integer) 2", "(integer) 3", "(integer) 4",
                                 "(integer) 5"));
}

TEST_F(FakeTransportTest, SendRejectsBadArgumentsWithoutCallingBack) {
  int calls = 0;
  auto cb = [&calls](absl::StatusOr<Reply>) { ++calls; };
  EXPECT_THAT(conn_.Send({}, kTimeout, cb), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn_.Send({"GET", "k"}, absl::ZeroDuration(), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn_.Send({"subscribe", "c"}, kTimeout, cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(conn_.Send({"MONITOR"}, kTimeout, cb), StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_EQ(calls, 0);
  EXPECT_THAT(conn_.sent(), IsEmpty());
}

TEST_F(FakeTransportTest, LatencyDelaysApplicationAndReply) {
  conn_.SetLatency(absl::Milliseconds(20));
  const absl::Time start = loop_.Now();
  Outcome out;
  SendTo(conn_, {"SET", "k", "v"}, &out);
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_FALSE(server_.Exists("k"));
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_TRUE(server_.Exists("k"));  // applied at rtt/2
  EXPECT_EQ(out.calls, 0);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_EQ(out.calls, 1);
  EXPECT_EQ(Since(start, out), absl::Milliseconds(20));
}

TEST_F(FakeTransportTest, AsymmetricLatency) {
  conn_.SetLatency(absl::Milliseconds(3), absl::Milliseconds(50));
  const absl::Time start = loop_.Now();
  Outcome out;
  SendTo(conn_, {"SET", "k", "v", "PX", "100"}, &out);
  loop_.AdvanceTime(absl::Milliseconds(3));
  EXPECT_EQ(server_.PTtl("k"), 100);
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_EQ(Since(start, out), absl::Milliseconds(53));
}

TEST_F(FakeTransportTest, TimeoutGivesDeadlineExceededButTheCommandStillRuns) {
  conn_.SetLatency(absl::Milliseconds(400), absl::Milliseconds(400));
  const absl::Time start = loop_.Now();
  Outcome out;
  SendTo(conn_, {"SET", "k", "v"}, &out, absl::Milliseconds(300));
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_EQ(out.calls, 1);
  EXPECT_THAT(*out.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(Since(start, out), absl::Milliseconds(300));
  EXPECT_TRUE(server_.Exists("k"));  // the request was on the wire
}

TEST_F(FakeTransportTest, DropNextRequestsNeverApplies) {
  conn_.DropNextRequests(2);
  const absl::Time start = loop_.Now();
  Outcome a, b, c;
  SendTo(conn_, {"SET", "a", "1"}, &a, absl::Milliseconds(100));
  SendTo(conn_, {"SET", "b", "1"}, &b, absl::Milliseconds(200));
  SendTo(conn_, {"SET", "c", "1"}, &c, absl::Milliseconds(300));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(*b.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(Since(start, a), absl::Milliseconds(100));
  EXPECT_EQ(Since(start, b), absl::Milliseconds(200));
  EXPECT_THAT(*c.result, IsOk());
  EXPECT_FALSE(server_.Exists("a"));
  EXPECT_FALSE(server_.Exists("b"));
  EXPECT_TRUE(server_.Exists("c"));
}

TEST_F(FakeTransportTest, DropNextRepliesAppliesButTimesOut) {
  conn_.DropNextReplies(1);
  const absl::Time start = loop_.Now();
  Outcome a, b;
  SendTo(conn_, {"SET", "a", "1"}, &a, absl::Milliseconds(250));
  SendTo(conn_, {"GET", "a"}, &b);
  loop_.RunUntilIdle();
  EXPECT_TRUE(server_.Exists("a"));
  EXPECT_EQ(a.calls, 0);
  EXPECT_THAT(*b.result, IsOkAndHolds(Reply::String("1")));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(Since(start, a), absl::Milliseconds(250));
}

TEST_F(FakeTransportTest, FailNextCompletesWithTheStatusWithoutApplying) {
  conn_.SetLatency(absl::Milliseconds(10));
  conn_.FailNext(2, absl::UnavailableError("injected"));
  Outcome a, b, c;
  SendTo(conn_, {"SET", "a", "1"}, &a);
  SendTo(conn_, {"SET", "b", "1"}, &b);
  SendTo(conn_, {"SET", "c", "1"}, &c);
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_EQ(a.calls, 0);  // still after the round trip
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(*b.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(*c.result, IsOk());
  EXPECT_FALSE(server_.Exists("a"));
  EXPECT_TRUE(server_.Exists("c"));
}

TEST_F(FakeTransportTest, FailNextWithReplyDeliversTheReply) {
  conn_.FailNextWithReply(1, Reply::Error("LOADING Redis is loading the dataset in memory"));
  Outcome a;
  SendTo(conn_, {"SET", "a", "1"}, &a);
  loop_.RunUntilIdle();
  ASSERT_THAT(*a.result, IsOk());
  EXPECT_TRUE(a.result->value().IsErrorWithPrefix("LOADING"));
  EXPECT_FALSE(server_.Exists("a"));
}

TEST_F(FakeTransportTest, PartitionFailsPendingAndNewCommandsUntilHealed) {
  conn_.SetLatency(absl::Milliseconds(100));
  Outcome before, during, after;
  SendTo(conn_, {"SET", "a", "1"}, &before);
  loop_.AdvanceTime(absl::Milliseconds(10));
  conn_.Partition();
  EXPECT_FALSE(conn_.connected());
  EXPECT_EQ(before.calls, 0);  // never inside Partition()
  loop_.RunUntilIdle();
  EXPECT_THAT(*before.result, StatusIs(absl::StatusCode::kUnavailable));
  SendTo(conn_, {"SET", "b", "1"}, &during);
  EXPECT_EQ(during.calls, 0);
  loop_.RunUntilIdle();
  EXPECT_THAT(*during.result, StatusIs(absl::StatusCode::kUnavailable));
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_FALSE(server_.Exists("a"));  // was not applied yet: never is
  EXPECT_FALSE(server_.Exists("b"));
  conn_.Heal();
  EXPECT_TRUE(conn_.connected());
  SendTo(conn_, {"SET", "c", "1"}, &after);
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_THAT(*after.result, IsOk());
  EXPECT_EQ(before.calls + during.calls + after.calls, 3);
}

TEST_F(FakeTransportTest, ServerRestartFailsInFlightAndLosesData) {
  Outcome set;
  SendTo(conn_, {"SET", "k", "v"}, &set);
  loop_.RunUntilIdle();
  conn_.SetLatency(absl::Milliseconds(10));
  Outcome pending;
  SendTo(conn_, {"GET", "k"}, &pending);
  server_.Restart();
  loop_.AdvanceTime(absl::Milliseconds(50));
  EXPECT_THAT(*pending.result, StatusIs(absl::StatusCode::kUnavailable));
  Outcome get;
  SendTo(conn_, {"GET", "k"}, &get);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*get.result, IsOkAndHolds(Reply::Nil()));
}

TEST_F(FakeTransportTest, ConnectionEpochChangesOnlyWhenTheConnectionIsRemade) {
  const uint64_t first = conn_.connection_epoch();
  EXPECT_NE(first, 0u);
  Outcome a;
  SendTo(conn_, {"PING"}, &a);
  loop_.RunUntilIdle();
  EXPECT_EQ(conn_.connection_epoch(), first) << "commands do not change it";

  server_.Restart();
  const uint64_t after_restart = conn_.connection_epoch();
  EXPECT_NE(after_restart, 0u);
  EXPECT_NE(after_restart, first);

  conn_.Partition();
  EXPECT_EQ(conn_.connection_epoch(), 0u) << "no connection while partitioned";
  conn_.Heal();
  const uint64_t after_heal = conn_.connection_epoch();
  EXPECT_NE(after_heal, 0u);
  EXPECT_NE(after_heal, first);
  EXPECT_NE(after_heal, after_restart);

  // Another connection to the same server has its own epoch sequence; a
  // restart moves it too.
  FakeTransport other(&loop_, &server_);
  const uint64_t other_first = other.connection_epoch();
  server_.Restart();
  EXPECT_NE(other.connection_epoch(), other_first);

  conn_.Close();
  EXPECT_EQ(conn_.connection_epoch(), 0u);
}

TEST_F(FakeTransportTest, ScriptIsLoadedOnEveryNewConnectionBeforeItRuns) {
  const Script script("return redis.call('incr', KEYS[1])");
  std::vector<std::string> results;
  auto run = [&] {
    ASSERT_THAT(script.Run(conn_, {"n"}, {}, kTimeout,
                           [&](absl::StatusOr<Reply> r) { results.push_back(r->DebugString()); }),
                IsOk());
    loop_.RunUntilIdle();
  };
  run();  // SCRIPT LOAD + EVALSHA
  run();  // EVALSHA
  server_.Restart();
  run();  // a new connection: SCRIPT LOAD + EVALSHA again
  EXPECT_THAT(results, ElementsAre("(integer) 1", "(integer) 2", "(integer) 1"));
  EXPECT_EQ(conn_.CountSent("EVALSHA"), 3);
  EXPECT_EQ(conn_.CountSent("SCRIPT"), 2);
  EXPECT_EQ(conn_.CountSent("eval"), 0);
  EXPECT_EQ(conn_.CountScriptRuns(script.sha1()), 3);
  EXPECT_EQ(conn_.CountScriptRuns(Sha1Hex("other")), 0);
}

// ---- Order (issue 22): a command sent after a script runs after it ---------

// The lock's three operations in miniature: a token-checked SET NX, a
// compare-and-delete, and an extend that re-creates a missing key (what
// RedLock's ExtendOrReacquire may do).
const Script& AcquireLike() {
  static const Script* s =
      new Script("return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 60000)");
  return *s;
}
const Script& ReleaseLike() {
  static const Script* s = new Script(
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
      "return 0");
  return *s;
}
const Script& ExtendOrReacquireLike() {
  static const Script* s = new Script(
      "local v = redis.call('get', KEYS[1]) "
      "if v == ARGV[1] or not v then redis.call('set', KEYS[1], ARGV[1], 'PX', 60000) "
      "return 1 end return 0");
  return *s;
}

class ScriptOrderTest : public FakeTransportTest {
 protected:
  void RunScript(FakeTransport& t, const Script& script, std::string key, std::string arg,
                 Outcome* out) {
    ASSERT_THAT(script.Run(t, {std::move(key)}, {std::move(arg)}, kTimeout,
                           [this, out](absl::StatusOr<Reply> r) {
                             out->result = std::move(r);
                             out->at = loop_.Now();
                             ++out->calls;
                           }),
                IsOk());
  }
  // The commands the server applied for `conn_`, in order, as "NAME".
  std::vector<std::string> Applied() {
    std::vector<std::string> names;
    for (const FakeRedis::LogEntry& e : server_.log()) {
      if (e.session_id == conn_.session_id() && !e.from_script) names.push_back(e.argv[0]);
    }
    return names;
  }
};

TEST_F(ScriptOrderTest, ColdScriptRunsBeforeACommandPipelinedBehindIt) {
  // Nothing loaded: the acquire script is the first on the connection, and
  // a DEL is written right behind it. The DEL must find the key.
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome acquire, del;
  RunScript(conn_, AcquireLike(), "lock", "t1", &acquire);
  SendTo(conn_, {"DEL", "lock"}, &del);
  loop_.AdvanceTime(absl::Milliseconds(10));
  ASSERT_EQ(acquire.calls, 1);
  ASSERT_EQ(del.calls, 1);
  EXPECT_THAT(*acquire.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(*del.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_FALSE(server_.Exists("lock")) << "the acquire ran after the DEL: a ghost key";
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
  EXPECT_THAT(Applied(), ElementsAre("SCRIPT", "EVALSHA", "DEL"));
}

TEST_F(ScriptOrderTest, ReleaseCachedButAcquireNotLeavesNoKey) {
  // Another client has run the release script on this server (it is in the
  // cache), never the acquire. Acquire and release go out back to back on
  // one connection, with latency: the release must run second.
  server_.Execute({"SCRIPT", "LOAD", ReleaseLike().source()});
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome acquire, release;
  RunScript(conn_, AcquireLike(), "lock", "t1", &acquire);
  RunScript(conn_, ReleaseLike(), "lock", "t1", &release);
  loop_.AdvanceTime(absl::Milliseconds(10));
  ASSERT_EQ(acquire.calls, 1);
  ASSERT_EQ(release.calls, 1);
  EXPECT_THAT(*acquire.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(*release.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_FALSE(server_.Exists("lock")) << "ghost key: the acquire ran after its release";
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
}

TEST_F(ScriptOrderTest, ColdAcquireAndReleaseScriptsRunInOrderAndLoadFirst) {
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome acquire, release;
  RunScript(conn_, AcquireLike(), "lock", "t1", &acquire);
  RunScript(conn_, ReleaseLike(), "lock", "t1", &release);
  loop_.AdvanceTime(absl::Milliseconds(10));
  EXPECT_THAT(*acquire.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(*release.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_FALSE(server_.Exists("lock"));
  // One round trip, no NOSCRIPT: each script loaded right before it runs.
  EXPECT_EQ(acquire.at, release.at);
  EXPECT_THAT(Applied(), ElementsAre("SCRIPT", "EVALSHA", "SCRIPT", "EVALSHA"));
}

TEST_F(ScriptOrderTest, FlushUnderTheConnectionNeverLetsAnExtendRunAfterTheRelease) {
  // Both scripts loaded on the connection, the lock held with token t1.
  Outcome warm1, warm2;
  RunScript(conn_, ExtendOrReacquireLike(), "lock", "t1", &warm1);
  RunScript(conn_, ReleaseLike(), "other", "x", &warm2);
  loop_.RunUntilIdle();
  ASSERT_TRUE(server_.Exists("lock"));
  // SCRIPT FLUSH on the server; then another client loads the release
  // script again (it released a lock of its own). The connection still
  // believes both loaded: the extend's EVALSHA meets NOSCRIPT, the
  // release's runs. The extend must never run after the release.
  server_.Execute({"SCRIPT", "FLUSH"});
  server_.Execute({"SCRIPT", "LOAD", ReleaseLike().source()});
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome extend, release;
  RunScript(conn_, ExtendOrReacquireLike(), "lock", "t1", &extend);
  RunScript(conn_, ReleaseLike(), "lock", "t1", &release);
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_EQ(extend.calls, 1);
  ASSERT_EQ(release.calls, 1);
  EXPECT_THAT(*release.result, IsOkAndHolds(Reply::Integer(1)));
  // The extend did not run, and says so: kUnavailable, never re-sent.
  EXPECT_THAT(*extend.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(server_.Exists("lock")) << "the extend re-created a released key";
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
  // After the NOSCRIPT the connection knows nothing loaded: the next script
  // is loaded first, and runs.
  Outcome again;
  RunScript(conn_, ExtendOrReacquireLike(), "lock2", "t2", &again);
  loop_.AdvanceTime(absl::Milliseconds(20));
  EXPECT_THAT(*again.result, IsOkAndHolds(Reply::Integer(1)));
}

// A script marked safe to run late (a compare-and-delete by a token nobody
// reuses) that met NOSCRIPT with a command behind it is sent once more,
// loaded first, instead of failing: a SCRIPT FLUSH must not leave the key of
// a released lease behind (the network torture's RedLock ghost).
const Script& LateSafeReleaseLike() {
  static const Script* s = new Script(ReleaseLike().source(), ReleaseLike().sha1(),
                                      Script::LateRun::kSafe);
  return *s;
}

TEST_F(ScriptOrderTest, ALateSafeScriptCutOffByAFlushIsSentAgainAndRuns) {
  Outcome warm1, warm2;
  RunScript(conn_, AcquireLike(), "lock", "t1", &warm1);
  RunScript(conn_, LateSafeReleaseLike(), "other", "x", &warm2);
  loop_.RunUntilIdle();
  ASSERT_TRUE(server_.Exists("lock"));
  server_.Execute({"SCRIPT", "FLUSH"});
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome release, behind;
  RunScript(conn_, LateSafeReleaseLike(), "lock", "t1", &release);
  RunScript(conn_, AcquireLike(), "unrelated", "t2", &behind);
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_EQ(release.calls, 1);
  ASSERT_EQ(behind.calls, 1);
  // The command behind it could not be re-sent in order (kUnavailable);
  // the release was, and ran.
  EXPECT_THAT(*behind.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(*release.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_FALSE(server_.Exists("lock")) << "a flush left the released key behind";
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
}

TEST_F(ScriptOrderTest, ANoScriptReadAfterItsCommandTimedOutStillMeansNothingIsLoaded) {
  // Both scripts loaded; SCRIPT FLUSH; then a script whose reply comes
  // after its timeout, with another written behind it. Neither callback
  // hears the NOSCRIPT, but the connection reads it: the next script must
  // be loaded first (else every later EVALSHA meets NOSCRIPT too and, with
  // commands behind it, never runs: the release retried forever).
  Outcome warm1, warm2;
  RunScript(conn_, AcquireLike(), "lock", "t1", &warm1);
  RunScript(conn_, ReleaseLike(), "other", "x", &warm2);
  loop_.RunUntilIdle();
  server_.Execute({"SCRIPT", "FLUSH"});
  conn_.SetLatency(kTimeout * 2);
  Outcome timed_out, behind;
  RunScript(conn_, ReleaseLike(), "lock", "t1", &timed_out);
  RunScript(conn_, AcquireLike(), "unrelated", "t2", &behind);
  loop_.AdvanceTime(kTimeout * 3);
  ASSERT_EQ(timed_out.calls, 1);
  EXPECT_THAT(*timed_out.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(server_.Exists("lock"));
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome again, behind_again;
  RunScript(conn_, ReleaseLike(), "lock", "t1", &again);
  RunScript(conn_, AcquireLike(), "unrelated2", "t3", &behind_again);
  loop_.AdvanceTime(absl::Milliseconds(20));
  EXPECT_THAT(*again.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_THAT(*behind_again.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_FALSE(server_.Exists("lock"));
}

TEST_F(ScriptOrderTest, NoScriptWithNothingSentAfterItIsResentTransparently) {
  Outcome warm;
  RunScript(conn_, AcquireLike(), "warm", "t0", &warm);
  loop_.RunUntilIdle();
  server_.Execute({"SCRIPT", "FLUSH"});
  conn_.ClearSent();
  conn_.SetLatency(absl::Milliseconds(2));
  Outcome acquire;
  RunScript(conn_, AcquireLike(), "lock", "t1", &acquire);
  loop_.AdvanceTime(absl::Milliseconds(20));
  ASSERT_EQ(acquire.calls, 1);
  EXPECT_THAT(*acquire.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_TRUE(server_.Exists("lock"));
  // EVALSHA (NOSCRIPT), then SCRIPT LOAD + EVALSHA: never EVAL.
  ASSERT_EQ(conn_.sent().size(), 3u);
  EXPECT_EQ(conn_.sent()[0][0], "EVALSHA");
  EXPECT_EQ(conn_.sent()[1][0], "SCRIPT");
  EXPECT_EQ(conn_.sent()[2][0], "EVALSHA");
  EXPECT_EQ(conn_.CountSent("EVAL"), 0);
}

TEST_F(ScriptOrderTest, ARefusedLoadIsTheScriptsAnswer) {
  const Script broken("this is not lua");
  Outcome out;
  ASSERT_THAT(broken.Run(conn_, {}, {}, kTimeout,
                         [&](absl::StatusOr<Reply> r) {
                           out.result = std::move(r);
                           ++out.calls;
                         }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_EQ(out.calls, 1);
  ASSERT_TRUE(out.result->ok());
  EXPECT_TRUE((*out.result)->is_error());
  EXPECT_FALSE((*out.result)->IsErrorWithPrefix("NOSCRIPT")) << (*out.result)->str;
}

TEST_F(ScriptOrderTest, LoadAndScriptTakeOneFaultTogether) {
  conn_.FailNext(1, absl::UnavailableError("injected"));
  Outcome first, second;
  RunScript(conn_, AcquireLike(), "lock", "t1", &first);
  RunScript(conn_, ReleaseLike(), "lock", "t1", &second);
  loop_.RunUntilIdle();
  EXPECT_THAT(*first.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(*second.result, IsOkAndHolds(Reply::Integer(0)));
  // The failed pair was not applied, so its script is still loaded first
  // next time.
  Outcome third;
  RunScript(conn_, AcquireLike(), "lock", "t1", &third);
  loop_.RunUntilIdle();
  EXPECT_THAT(*third.result, IsOkAndHolds(Reply::Status("OK")));
}

TEST_F(FakeTransportTest, KeysExpireInVirtualTime) {
  Outcome set, get;
  SendTo(conn_, {"SET", "k", "v", "PX", "30000"}, &set);
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(30));
  EXPECT_TRUE(server_.Exists("k"));
  loop_.AdvanceTime(absl::Milliseconds(1));
  SendTo(conn_, {"GET", "k"}, &get);
  loop_.RunUntilIdle();
  EXPECT_THAT(*get.result, IsOkAndHolds(Reply::Nil()));
}

TEST_F(FakeTransportTest, ConnectionsShareOneServer) {
  FakeTransport other(&loop_, &server_);
  Outcome a, b;
  SendTo(conn_, {"SET", "k", "mine", "NX"}, &a);
  SendTo(other, {"SET", "k", "theirs", "NX"}, &b);
  loop_.RunUntilIdle();
  EXPECT_THAT(*a.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(*b.result, IsOkAndHolds(Reply::Nil()));
  EXPECT_NE(conn_.session_id(), other.session_id());
  ASSERT_EQ(server_.log().size(), 2u);
  EXPECT_EQ(server_.log()[1].session_id, other.session_id());
}

TEST_F(FakeTransportTest, CloseCancelsPendingSynchronouslyAndRejectsLaterSends) {
  conn_.SetLatency(absl::Milliseconds(10));
  Outcome a;
  SendTo(conn_, {"SET", "a", "1"}, &a);
  bool ready_called = false;
  absl::Status ready;
  auto sub = conn_.Subscribe("c", [](absl::string_view, absl::string_view) {},
                             [&](absl::Status s) {
                               ready_called = true;
                               ready = s;
                             });
  ASSERT_THAT(sub, IsOk());
  conn_.Close();
  EXPECT_THAT(*a.result, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(ready_called);
  EXPECT_THAT(ready, StatusIs(absl::StatusCode::kCancelled));
  Outcome b;
  EXPECT_THAT(TrySend(conn_, {"GET", "a"}, &b), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(conn_.Subscribe("c", [](absl::string_view, absl::string_view) {}, nullptr),
              StatusIs(absl::StatusCode::kCancelled));
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(b.calls, 0);
  EXPECT_FALSE(server_.Exists("a"));
  EXPECT_EQ(loop_.pending(), 0u);  // no timer left behind
  sub->reset();  // a handle may outlive the connection
}

TEST_F(FakeTransportTest, TransportMayBeDestroyedInsideItsOwnCallback) {
  auto conn = std::make_unique<FakeTransport>(&loop_, &server_);
  int calls = 0;
  ASSERT_THAT(conn->Send({"SET", "a", "1"}, kTimeout,
                         [&](absl::StatusOr<Reply>) {
                           ++calls;
                           conn.reset();
                         }),
              IsOk());
  ASSERT_THAT(conn->Send({"SET", "b", "1"}, kTimeout,
                         [&](absl::StatusOr<Reply> r) {
                           ++calls;
                           EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
                         }),
              IsOk());
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(conn, nullptr);
}

TEST_F(FakeTransportTest, ConnectReportsConnectionState) {
  std::vector<absl::Status> seen;
  ASSERT_THAT(conn_.Connect([&](absl::Status s) { seen.push_back(s); }), IsOk());
  EXPECT_THAT(seen, IsEmpty());
  loop_.RunUntilIdle();
  conn_.Partition();
  ASSERT_THAT(conn_.Connect([&](absl::Status s) { seen.push_back(s); }), IsOk());
  loop_.RunUntilIdle();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_THAT(seen[0], IsOk());
  EXPECT_THAT(seen[1], StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(FakeTransportTest, SentLogRecordsEveryAcceptedCommand) {
  conn_.DropNextRequests(1);
  Outcome a, b;
  SendTo(conn_, {"SET", "a", "1"}, &a);
  SendTo(conn_, {"pexpire", "a", "5"}, &b);
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_EQ(conn_.sent().size(), 2u);
  EXPECT_EQ(conn_.CountSent("PEXPIRE"), 1);
  EXPECT_EQ(server_.CountInLog("SET"), 0);  // dropped: never reached the server
  conn_.ClearSent();
  EXPECT_THAT(conn_.sent(), IsEmpty());
}

// ---- pub/sub ---------------------------------------------------------------

class FakeTransportPubSubTest : public FakeTransportTest {
 protected:
  std::unique_ptr<Subscription> Sub(FakeTransport& t, const std::string& channel,
                                    std::vector<std::string>* messages,
                                    std::vector<absl::Status>* ready) {
    auto s = t.Subscribe(
        channel,
        [messages](absl::string_view ch, absl::string_view m) {
          messages->push_back(std::string(ch) + ":" + std::string(m));
        },
        [ready](absl::Status st) { ready->push_back(st); });
    EXPECT_THAT(s, IsOk());
    return std::move(*s);
  }
  int64_t Publish(const std::string& ch, const std::string& m) {
    return server_.Execute({"PUBLISH", ch, m}).integer;
  }

 public:
  // Confirms pending subscriptions, publishes, delivers.
  void RunPublishRun(const std::string& ch, const std::string& m) {
    loop_.RunUntilIdle();
    Publish(ch, m);
    loop_.RunUntilIdle();
  }
};

TEST_F(FakeTransportPubSubTest, SubscribeConfirmsThenDeliversMessages) {
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(conn_, "c", &got, &ready);
  EXPECT_THAT(ready, IsEmpty());
  loop_.RunUntilIdle();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_THAT(ready[0], IsOk());
  EXPECT_EQ(Publish("c", "m1"), 1);
  EXPECT_THAT(got, IsEmpty());  // delivered on the loop
  loop_.RunUntilIdle();
  EXPECT_THAT(got, ElementsAre("c:m1"));
  EXPECT_EQ(Publish("other", "x"), 0);
}

TEST_F(FakeTransportPubSubTest, EverySubscriptionGetsEachMessageAndOneConnectionCountsOnce) {
  std::vector<std::string> a, b;
  std::vector<absl::Status> ready;
  auto s1 = Sub(conn_, "c", &a, &ready);
  auto s2 = Sub(conn_, "c", &b, &ready);
  loop_.RunUntilIdle();
  EXPECT_EQ(Publish("c", "m"), 1);
  loop_.RunUntilIdle();
  EXPECT_THAT(a, ElementsAre("c:m"));
  EXPECT_THAT(b, ElementsAre("c:m"));
  s1.reset();
  EXPECT_EQ(Publish("c", "n"), 1);
  loop_.RunUntilIdle();
  EXPECT_THAT(a, ElementsAre("c:m"));
  EXPECT_THAT(b, ElementsAre("c:m", "c:n"));
  s2.reset();
  EXPECT_EQ(Publish("c", "o"), 0);
}

TEST_F(FakeTransportPubSubTest, ScriptPublishReachesOtherConnection) {
  FakeTransport listener(&loop_, &server_);
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(listener, "released", &got, &ready);
  loop_.RunUntilIdle();
  Outcome out;
  SendTo(conn_, {"EVAL", "return redis.call('publish', ARGV[1], 'bye')", "0", "released"}, &out);
  loop_.RunUntilIdle();
  EXPECT_THAT(*out.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_THAT(got, ElementsAre("released:bye"));
}

TEST_F(FakeTransportPubSubTest, MessagesWaitForTheReplyLatency) {
  conn_.SetLatency(absl::Milliseconds(10), absl::Milliseconds(30));
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(conn_, "c", &got, &ready);
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_EQ(Publish("c", "early"), 0);  // SUBSCRIBE not there yet
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_EQ(Publish("c", "m"), 1);
  loop_.AdvanceTime(absl::Milliseconds(29));
  EXPECT_THAT(got, IsEmpty());
  EXPECT_THAT(ready, IsEmpty());
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_THAT(got, ElementsAre("c:m"));
  ASSERT_EQ(ready.size(), 1u);
}

TEST_F(FakeTransportPubSubTest, SubscribeDelayPostponesTheSubscriptionAndItsConfirmation) {
  conn_.SetLatency(absl::Milliseconds(10), absl::Milliseconds(30));
  conn_.SetSubscribeDelay(absl::Milliseconds(100));
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(conn_, "c", &got, &ready);
  loop_.AdvanceTime(absl::Milliseconds(109));
  EXPECT_EQ(Publish("c", "early"), 0);  // SUBSCRIBE not there yet
  // Commands are not delayed.
  Outcome out;
  SendTo(conn_, {"PING"}, &out);
  loop_.AdvanceTime(absl::Milliseconds(1));
  EXPECT_EQ(Publish("c", "m"), 1);
  loop_.AdvanceTime(absl::Milliseconds(29));
  EXPECT_THAT(ready, IsEmpty());
  loop_.AdvanceTime(absl::Milliseconds(1));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_THAT(ready[0], IsOk());
  EXPECT_THAT(got, ElementsAre("c:m"));
  // The PING sent at 109 ms took one ordinary round trip.
  EXPECT_FALSE(out.result.has_value());
  loop_.AdvanceTime(absl::Milliseconds(9));
  EXPECT_TRUE(out.result.has_value());
}

TEST_F(FakeTransportPubSubTest, PartitionLosesMessagesAndHealResubscribes) {
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(conn_, "c", &got, &ready);
  loop_.RunUntilIdle();
  conn_.Partition();
  EXPECT_EQ(Publish("c", "lost"), 0);
  std::vector<std::string> late;
  std::vector<absl::Status> late_ready;
  auto late_sub = Sub(conn_, "d", &late, &late_ready);
  loop_.RunUntilIdle();
  ASSERT_EQ(late_ready.size(), 1u);
  EXPECT_THAT(late_ready[0], StatusIs(absl::StatusCode::kUnavailable));
  conn_.Heal();
  EXPECT_EQ(Publish("c", "back"), 1);
  EXPECT_EQ(Publish("d", "also"), 1);  // stays registered, subscribed on heal
  loop_.RunUntilIdle();
  EXPECT_THAT(got, ElementsAre("c:back"));
  EXPECT_THAT(late, ElementsAre("d:also"));
  EXPECT_EQ(ready.size(), 1u);  // on_ready ran once
}

TEST_F(FakeTransportPubSubTest, ServerRestartResubscribes) {
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  auto sub = Sub(conn_, "c", &got, &ready);
  loop_.RunUntilIdle();
  server_.Restart();
  EXPECT_EQ(Publish("c", "m"), 1);
  loop_.RunUntilIdle();
  EXPECT_THAT(got, ElementsAre("c:m"));
}

TEST_F(FakeTransportPubSubTest, DestroyingSubscriptionInsideItsCallbackStopsIt) {
  std::unique_ptr<Subscription> sub;
  int calls = 0;
  auto s = conn_.Subscribe(
      "c",
      [&](absl::string_view, absl::string_view) {
        ++calls;
        sub.reset();
      },
      nullptr);
  ASSERT_THAT(s, IsOk());
  sub = std::move(*s);
  loop_.RunUntilIdle();
  Publish("c", "1");
  Publish("c", "2");
  loop_.RunUntilIdle();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Publish("c", "3"), 0);
}

// Two subscriptions of "c" on `t` that log their name into `order`; the
// first then runs `inside` (which may close or destroy `t`). Publishes one
// message and runs the loop.
std::vector<std::unique_ptr<Subscription>> SubscribeTwoAndPublish(
    FakeTransportPubSubTest* test, FakeTransport& t, std::vector<std::string>* order,
    std::function<void()> inside) {
  std::vector<std::unique_ptr<Subscription>> subs;
  for (std::string name : {"first", "second"}) {
    auto s = t.Subscribe(
        "c",
        [order, name, inside](absl::string_view, absl::string_view) {
          order->push_back(name);
          if (name == "first") inside();
        },
        nullptr);
    EXPECT_THAT(s, IsOk());
    if (s.ok()) subs.push_back(*std::move(s));
  }
  test->RunPublishRun("c", "1");
  return subs;
}

// A message for several subscriptions goes to them in subscription order;
// when one callback closes the transport, the later ones get nothing.
TEST_F(FakeTransportPubSubTest, ClosingInsideAMessageCallbackStopsTheDelivery) {
  std::vector<std::string> order;
  auto subs = SubscribeTwoAndPublish(this, conn_, &order, [this] { conn_.Close(); });
  EXPECT_THAT(order, ElementsAre("first"));
}

// The transport may be destroyed inside a message callback: the other
// subscriptions of that message get nothing, and their handles, destroyed
// later, touch nothing.
TEST_F(FakeTransportPubSubTest, DestroyingTheTransportInsideAMessageCallbackStopsTheDelivery) {
  auto conn = std::make_unique<FakeTransport>(&loop_, &server_);
  std::vector<std::string> order;
  auto subs = SubscribeTwoAndPublish(this, *conn, &order, [&conn] { conn.reset(); });
  EXPECT_EQ(conn, nullptr);
  EXPECT_THAT(order, ElementsAre("first"));
  subs.clear();
}

TEST_F(FakeTransportPubSubTest, SubscribeRejectsNullHandler) {
  EXPECT_THAT(conn_.Subscribe("c", nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---- randomized contract check ---------------------------------------------

// Random sends interleaved with every fault, partitions, restarts and time
// steps: each accepted callback runs exactly once, never inside Send, never
// after its deadline, and replies arrive in send order.
TEST(FakeTransportStressTest, ContractHoldsUnderRandomFaults) {
  int answered = 0, failed = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
    ManualEventLoop loop;
    FakeRedis server(&loop);
    FakeTransport conn(&loop, &server);
    struct Record {
      absl::Time sent;
      absl::Duration timeout;
      int calls = 0;
      bool ok = false;
      absl::Time at;
    };
    std::vector<std::unique_ptr<Record>> records;
    std::vector<size_t> reply_order;
    bool in_send = false;
    for (int step = 0; step < 400; ++step) {
      switch (pick(12)) {
        case 0: conn.SetLatency(absl::Milliseconds(pick(40))); break;
        case 1: conn.DropNextRequests(pick(3)); break;
        case 2: conn.DropNextReplies(pick(3)); break;
        case 3: conn.FailNext(pick(3), absl::UnavailableError("x")); break;
        case 4: pick(2) ? conn.Partition() : conn.Heal(); break;
        case 5: if (pick(4) == 0) server.Restart(); break;
        case 6: case 7: loop.AdvanceTime(absl::Milliseconds(pick(60))); break;
        default: {
          const size_t index = records.size();
          records.push_back(std::make_unique<Record>());
          Record* r = records.back().get();
          r->sent = loop.Now();
          r->timeout = absl::Milliseconds(1 + pick(100));
          in_send = true;
          absl::Status s = conn.Send(
              {"INCR", "n"}, r->timeout,
              [&, r, index](absl::StatusOr<Reply> reply) {
                EXPECT_FALSE(in_send);
                ++r->calls;
                r->at = loop.Now();
                r->ok = reply.ok();
                if (reply.ok()) reply_order.push_back(index);
              });
          in_send = false;
          ASSERT_THAT(s, IsOk());
        }
      }
    }
    loop.AdvanceTime(absl::Seconds(1));
    for (const auto& r : records) {
      EXPECT_EQ(r->calls, 1);
      EXPECT_LE(r->at, r->sent + r->timeout);
      (r->ok ? answered : failed) += 1;
    }
    for (size_t i = 1; i < reply_order.size(); ++i) {
      EXPECT_LT(reply_order[i - 1], reply_order[i]);
    }
    conn.Close();
    EXPECT_EQ(loop.pending(), 0u);
  }
  // Both outcomes were exercised.
  EXPECT_GT(answered, 200);
  EXPECT_GT(failed, 200);
}

// ---- on the real loop --------------------------------------------------------

TEST(FakeTransportOnUvLoopTest, WorksOnTheRealEventLoop) {
  UvLoopThread thread;
  std::promise<std::string> done;
  std::unique_ptr<FakeRedis> server;
  std::unique_ptr<FakeTransport> conn;
  ASSERT_TRUE(thread.Post([&] {
    server = std::make_unique<FakeRedis>(thread.loop());
    conn = std::make_unique<FakeTransport>(thread.loop(), server.get());
    conn->SetLatency(absl::Milliseconds(2));
    absl::Status s = conn->Send({"SET", "k", "v", "PX", "50"}, kTimeout, [&](absl::StatusOr<Reply>) {
      absl::Status s2 = conn->Send({"GET", "k"}, kTimeout, [&](absl::StatusOr<Reply> r) {
        done.set_value(r.ok() ? r->DebugString() : r.status().ToString());
      });
      if (!s2.ok()) done.set_value(s2.ToString());
    });
    if (!s.ok()) done.set_value(s.ToString());
  }));
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(future.get(), "\"v\"");
  std::promise<void> cleaned;
  ASSERT_TRUE(thread.Post([&] {
    conn.reset();
    server.reset();
    cleaned.set_value();
  }));
  ASSERT_EQ(cleaned.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
}

}  // namespace
}  // namespace dlock
