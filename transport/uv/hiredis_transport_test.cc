// Tests of HiredisTransport against real redis-server processes started by
// //testing:redis_server. Every test ends with uv_loop_close() == 0.
#include "dlock/transport/uv/hiredis_transport.h"

#include <uv.h>

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/script.h"
#include "dlock/transport/uv/script_order_check.h"
#include "dlock/transport/uv/transport_contract_suite.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::RedisServerOptions;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;

constexpr absl::Duration kLong = absl::Seconds(10);

// The server and transport of HiredisTransportTest and of the transport
// contract (transport_contract_suite.h) over plain TCP.
struct HiredisKind {
  using Server = RedisServer;
  using ServerOptions = RedisServerOptions;
  using Transport = HiredisTransport;
  using Options = HiredisTransportOptions;
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions options) {
    return RedisServer::Start(std::move(options));
  }
  static RedisServer& Data(RedisServer& s) { return s; }
  static HiredisTransportOptions DefaultOptions(RedisServer& server) {
    HiredisTransportOptions o;
    o.host = "127.0.0.1";
    o.port = server.port();
    o.reconnect_backoff_min = absl::Milliseconds(10);
    o.reconnect_backoff_max = absl::Milliseconds(100);
    return o;
  }
  static absl::StatusOr<std::unique_ptr<HiredisTransport>> Create(
      uv_loop_t* loop, HiredisTransportOptions options) {
    return HiredisTransport::Create(loop, std::move(options));
  }
};

class HiredisTransportTest : public test_support::UvTransportFixture<HiredisKind> {};

TEST_F(HiredisTransportTest, EveryReplyTypeIsCopied) {
  MakeTransport(Options());
  EXPECT_THAT(Call({"SET", "k", "v"}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(Call({"GET", "k"}), IsOkAndHolds(Reply::String("v")));
  EXPECT_THAT(Call({"GET", "missing"}), IsOkAndHolds(Reply::Nil()));
  EXPECT_THAT(Call({"INCRBY", "n", "-7"}), IsOkAndHolds(Reply::Integer(-7)));
  EXPECT_THAT(Call({"RPUSH", "list", "a", "b"}), IsOkAndHolds(Reply::Integer(2)));
  EXPECT_THAT(Call({"LRANGE", "list", "0", "-1"}),
              IsOkAndHolds(Reply::Array({Reply::String("a"), Reply::String("b")})));
  EXPECT_THAT(Call({"LRANGE", "missing", "0", "-1"}), IsOkAndHolds(Reply::Array({})));
  EXPECT_THAT(Call({"EVAL", "return {1, 'a', {2, 'b'}}", "0"}),
              IsOkAndHolds(Reply::Array(
                  {Reply::Integer(1), Reply::String("a"),
                   Reply::Array({Reply::Integer(2), Reply::String("b")})})));
  // A nil multi-bulk reply (RESP2 "*-1").
  EXPECT_THAT(Call({"BLPOP", "empty", "0.01"}), IsOkAndHolds(Reply::Nil()));
  absl::StatusOr<Reply> err = Call({"GET", "list"});
  ASSERT_THAT(err, IsOk());
  EXPECT_TRUE(err->IsErrorWithPrefix("WRONGTYPE")) << *err;
  absl::StatusOr<Reply> unknown = Call({"NOSUCHCOMMAND"});
  ASSERT_THAT(unknown, IsOk());
  EXPECT_TRUE(unknown->IsErrorWithPrefix("ERR")) << *unknown;
}

TEST_F(HiredisTransportTest, KeysAndValuesMayHoldAnyByte) {
  MakeTransport(Options());
  const std::string key("k\0e\r\ny", 6);
  std::string value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
  EXPECT_THAT(Call({"SET", key, value}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(Call({"GET", key}), IsOkAndHolds(Reply::String(value)));
  EXPECT_THAT(server_->Command({"GET", key}), IsOkAndHolds(Reply::String(value)));
  EXPECT_THAT(Call({"GET", std::string("k\0e", 3)}), IsOkAndHolds(Reply::Nil()));
}

TEST_F(HiredisTransportTest, AnEarlierDeadlineSentLaterFiresFirst) {
  // Deadlines are kept in one list sorted by deadline: a command with a
  // shorter timeout sent after one with a long timeout expires on its own.
  MakeTransport(Options());
  ASSERT_THAT(Call({"SET", "k", "v"}), IsOk());
  ASSERT_THAT(server_->Pause(), IsOk());
  std::optional<absl::StatusOr<Reply>> long_one, short_one;
  ASSERT_THAT(transport_->Send({"INCR", "n"}, kLong,
                               [&](absl::StatusOr<Reply> r) { long_one = std::move(r); }),
              IsOk());
  ASSERT_THAT(transport_->Send({"GET", "k"}, absl::Milliseconds(100),
                               [&](absl::StatusOr<Reply> r) { short_one = std::move(r); }),
              IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return short_one.has_value(); }));
  EXPECT_THAT(*short_one, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(long_one.has_value());
  ASSERT_THAT(server_->Resume(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return long_one.has_value(); }));
  EXPECT_THAT(*long_one, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_EQ(transport_->pending_commands(), 0u);
}

TEST_F(HiredisTransportTest, ReplyIsDeliveredInTheLoopTurnThatReadIt) {
  // libuv runs, per turn: timers, prepare handles, poll (I/O), check
  // handles. A reply delivered from the read runs between a prepare and the
  // check of the same turn; one parked for a later turn's timer would run
  // when both counters are equal.
  MakeTransport(Options());
  ASSERT_THAT(ConnectAndWait(*transport_), IsOk());
  struct Phases {
    uv_prepare_t prepare;
    uv_check_t check;
    int prepares = 0;
    int checks = 0;
  } phases;
  uv_prepare_init(loop_.get(), &phases.prepare);
  uv_check_init(loop_.get(), &phases.check);
  phases.prepare.data = phases.check.data = &phases;
  uv_prepare_start(&phases.prepare,
                   [](uv_prepare_t* h) { ++static_cast<Phases*>(h->data)->prepares; });
  uv_check_start(&phases.check,
                 [](uv_check_t* h) { ++static_cast<Phases*>(h->data)->checks; });
  for (int i = 0; i < 20; ++i) {
    std::optional<bool> in_io_phase;
    ASSERT_THAT(transport_->Send({"PING"}, kLong,
                                 [&](absl::StatusOr<Reply> r) {
                                   EXPECT_THAT(r, IsOk());
                                   in_io_phase = phases.prepares == phases.checks + 1;
                                 }),
                IsOk());
    ASSERT_TRUE(loop_.RunUntil([&] { return in_io_phase.has_value(); }));
    EXPECT_TRUE(*in_io_phase) << "command " << i;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&phases.prepare), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&phases.check), nullptr);
  loop_.RunFor(absl::Milliseconds(1));
}

TEST_F(HiredisTransportTest, ACommandSentBetweenLoopRunsIsAnsweredInOneRunOnce) {
  // What a caller turn (loop_turns.h) does per round trip: send from
  // outside the loop, then uv_run(UV_RUN_ONCE) until the reply came. The
  // write must go out before that run's poll, and the poll must wait for
  // the reply rather than return empty and cost a second run. The server
  // holds each reply back (BLPOP on a missing key with a 50 ms timeout), so
  // a poll that does not wait cannot find it, however fast the server is.
  MakeTransport(Options());
  ASSERT_THAT(ConnectAndWait(*transport_), IsOk());
  uv_loop_t* loop = loop_.get();
  for (int i = 0; i < 5; ++i) {
    // Nothing left due from the previous command (deferred events, timers).
    while (uv_backend_timeout(loop) == 0) uv_run(loop, UV_RUN_NOWAIT);
    bool answered = false;
    ASSERT_THAT(transport_->Send({"BLPOP", "no-such-list", "0.05"}, kLong,
                                 [&](absl::StatusOr<Reply> r) {
                                   EXPECT_THAT(r, IsOkAndHolds(Reply::Nil()));
                                   answered = true;
                                 }),
                IsOk());
    int runs = 0;
    while (!answered && runs < 100) {
      uv_run(loop, UV_RUN_ONCE);
      ++runs;
    }
    EXPECT_EQ(runs, 1) << "command " << i;
  }
}

TEST_F(HiredisTransportTest, KilledServerFailsPendingCommandsWithUnavailable) {
  MakeTransport(Options());
  ASSERT_THAT(ConnectAndWait(*transport_), IsOk());
  ASSERT_THAT(server_->Pause(), IsOk());  // so the commands are surely in flight
  std::vector<absl::Status> results;
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(transport_->Send({"INCR", "n"}, kLong,
                                 [&](absl::StatusOr<Reply> r) { results.push_back(r.status()); }),
                IsOk());
  }
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->pending_commands() == 3; }));
  ASSERT_THAT(server_->Kill(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return results.size() == 3; }));
  for (const absl::Status& s : results) EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(transport_->connected());
}

TEST_F(HiredisTransportTest, CommandsFailFastWhileTheServerIsKnownDown) {
  MakeTransport(Options());
  ASSERT_THAT(ConnectAndWait(*transport_), IsOk());
  ASSERT_THAT(server_->Kill(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return !transport_->connected(); }));
  // The immediate reconnect (or the one Connect starts) is refused: backoff.
  EXPECT_THAT(ConnectAndWait(*transport_), StatusIs(absl::StatusCode::kUnavailable));
  const absl::Time start = transport_->event_loop().Now();
  EXPECT_THAT(Call({"PING"}, absl::Seconds(30)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(transport_->event_loop().Now() - start, absl::Seconds(30));
}

TEST_F(HiredisTransportTest, ReconnectsAfterTheServerRestarts) {
  MakeTransport(Options());
  ASSERT_THAT(Call({"SET", "k", "v"}), IsOk());
  ASSERT_THAT(server_->Kill(), IsOk());
  EXPECT_THAT(Call({"GET", "k"}), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(server_->Restart(), IsOk());
  // Background retries find the server again without being asked.
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  EXPECT_THAT(Call({"SET", "k", "w"}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(Call({"GET", "k"}), IsOkAndHolds(Reply::String("w")));
}

TEST_F(HiredisTransportTest, ConnectionEpochNamesEachReadyConnection) {
  MakeTransport(Options());
  EXPECT_EQ(transport_->connection_epoch(), 0u) << "not connected yet";
  ASSERT_THAT(Call({"PING"}), IsOk());
  const uint64_t first = transport_->connection_epoch();
  EXPECT_NE(first, 0u);
  ASSERT_THAT(Call({"PING"}), IsOk());
  EXPECT_EQ(transport_->connection_epoch(), first) << "commands do not change it";

  // A restarted server is reached over a new connection, with a new epoch.
  ASSERT_THAT(server_->Kill(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return !transport_->connected(); }));
  EXPECT_EQ(transport_->connection_epoch(), 0u);
  ASSERT_THAT(server_->Restart(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  const uint64_t second = transport_->connection_epoch();
  EXPECT_NE(second, 0u);
  EXPECT_NE(second, first);

  // So does a connection the server dropped without restarting.
  ASSERT_THAT(server_->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}),
              IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(loop_.RunUntil([&] { return !transport_->connected(); }));
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  EXPECT_NE(transport_->connection_epoch(), second);
  EXPECT_NE(transport_->connection_epoch(), first);

  transport_->Close();
  EXPECT_EQ(transport_->connection_epoch(), 0u);
}

TEST_F(HiredisTransportTest, LossOfAStableConnectionReconnectsAtOnceAndCommandsWait) {
  MakeTransport(Options());
  ASSERT_THAT(Call({"PING"}), IsOk());
  loop_.RunFor(absl::Milliseconds(1100));  // "stable": up for more than 1 s
  ASSERT_THAT(server_->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}),
              IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(loop_.RunUntil([&] { return !transport_->connected(); }));
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST_F(HiredisTransportTest, ConnectionLostRightAfterConnectingBacksOffAndFailsFast) {
  MakeTransport(Options());
  // A round trip, so the server has surely accepted the connection.
  ASSERT_THAT(Call({"PING"}), IsOk());
  ASSERT_THAT(server_->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}),
              IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(loop_.RunUntil([&] { return !transport_->connected(); }));
  EXPECT_THAT(Call({"PING"}, absl::Seconds(30)), StatusIs(absl::StatusCode::kUnavailable));
  // The background retry comes after the backoff.
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST_F(HiredisTransportTest, CommandsSentWhileConnectingWaitForTheConnection) {
  MakeTransport(Options());
  EXPECT_FALSE(transport_->connected());
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST_F(HiredisTransportTest, ScriptRunsAgainAfterScriptFlush) {
  MakeTransport(Options());
  static const Script script("return 'got ' .. ARGV[1] .. KEYS[1]");
  auto run = [&](std::string arg) {
    std::optional<absl::StatusOr<Reply>> result;
    EXPECT_THAT(script.Run(*transport_, {"k"}, {std::move(arg)}, kLong,
                           [&](absl::StatusOr<Reply> r) { result = std::move(r); }),
                IsOk());
    EXPECT_TRUE(loop_.RunUntil([&] { return result.has_value(); }));
    return result.value_or(absl::InternalError("no callback"));
  };
  EXPECT_THAT(run("a"), IsOkAndHolds(Reply::String("got ak")));
  EXPECT_THAT(server_->Command({"SCRIPT", "EXISTS", script.sha1()}),
              IsOkAndHolds(Reply::Array({Reply::Integer(1)})));
  ASSERT_THAT(server_->Command({"SCRIPT", "FLUSH"}), IsOk());
  EXPECT_THAT(run("b"), IsOkAndHolds(Reply::String("got bk")));
}

TEST_F(HiredisTransportTest, ScriptsAreLoadedAgainOnTheConnectionMadeAfterARestart) {
  MakeTransport(Options());
  using script_order_check::AcquireLike;
  using script_order_check::ReleaseLike;
  auto server = [this](std::vector<std::string> argv) {
    return server_->Command(std::move(argv));
  };
  // Both scripts loaded on the first connection.
  script_order_check::Outcome a0, r0;
  script_order_check::AcquireThenRelease(*transport_, loop_, "warm", "t0", &a0, &r0);
  ASSERT_THAT(*r0.result, IsOkAndHolds(Reply::Integer(1)));
  // A restart empties the cache; another client then loads the release.
  ASSERT_THAT(server_->Kill(), IsOk());
  EXPECT_THAT(Call({"PING"}), StatusIs(absl::StatusCode::kUnavailable));  // seen lost
  ASSERT_THAT(server_->Restart(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  ASSERT_THAT(server({"SCRIPT", "LOAD", ReleaseLike().source()}), IsOk());
  // The new connection knows nothing loaded: the acquire is loaded before
  // it runs, and the release behind it finds the key.
  script_order_check::Outcome a1, r1;
  script_order_check::AcquireThenRelease(*transport_, loop_, "after", "t1", &a1, &r1);
  EXPECT_THAT(*a1.result, IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(*r1.result, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_FALSE(script_order_check::KeyExists(server, "after"));
  absl::StatusOr<Reply> errors = server({"INFO", "errorstats"});
  ASSERT_THAT(errors, IsOk());
  EXPECT_FALSE(absl::StrContains(errors->str, "NOSCRIPT")) << errors->str;
}

TEST_F(HiredisTransportTest, SelectsTheConfiguredDatabase) {
  HiredisTransportOptions o = Options();
  o.db = 3;
  MakeTransport(o);
  ASSERT_THAT(Call({"SET", "k", "in3"}), IsOk());
  EXPECT_THAT(server_->Command({"GET", "k"}), IsOkAndHolds(Reply::Nil()));
  ASSERT_THAT(server_->Command({"SELECT", "3"}), IsOk());
  EXPECT_THAT(server_->Command({"GET", "k"}), IsOkAndHolds(Reply::String("in3")));
}

TEST_F(HiredisTransportTest, ConnectsOverAUnixSocket) {
  RedisServerOptions so;
  so.unix_socket = true;
  StartServer(so);
  HiredisTransportOptions o;
  o.unix_socket = server_->unix_socket();
  MakeTransport(o);
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST_F(HiredisTransportTest, ResolvesHostNames) {
  HiredisTransportOptions o = Options();
  o.host = "localhost";
  MakeTransport(o);
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

class HiredisTransportAuthTest : public HiredisTransportTest {
 protected:
  void SetUp() override {
    RedisServerOptions so;
    so.password = "secret";
    so.extra_args = {"--user", "alice", "on", ">alicepw", "~*", "&*", "+@all"};
    StartServer(so);
  }
};

TEST_F(HiredisTransportAuthTest, RightPasswordConnects) {
  HiredisTransportOptions o = Options();
  o.password = "secret";
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), IsOk());
  EXPECT_THAT(Call({"ACL", "WHOAMI"}), IsOkAndHolds(Reply::String("default")));
}

TEST_F(HiredisTransportAuthTest, WrongPasswordFailsWithUnavailable) {
  HiredisTransportOptions o = Options();
  o.password = "wrong";
  MakeTransport(o);
  absl::Status s = ConnectAndWait(*transport_);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("AUTH"));
  EXPECT_THAT(Call({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(transport_->connected());
}

TEST_F(HiredisTransportAuthTest, AclUserWithRightPasswordConnects) {
  HiredisTransportOptions o = Options();
  o.username = "alice";
  o.password = "alicepw";
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), IsOk());
  EXPECT_THAT(Call({"ACL", "WHOAMI"}), IsOkAndHolds(Reply::String("alice")));
}

TEST_F(HiredisTransportAuthTest, AclUserWithWrongPasswordFails) {
  HiredisTransportOptions o = Options();
  o.username = "alice";
  o.password = "secret";  // the default user's, not alice's
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(HiredisTransportAuthTest, SubscribingToAForbiddenChannelReportsUnavailable) {
  ASSERT_THAT(server_->Command({"ACL", "SETUSER", "bob", "on", ">bobpw", "~*", "+@all",
                                "resetchannels"}),
              IsOk());
  HiredisTransportOptions o = Options();
  o.username = "bob";
  o.password = "bobpw";
  MakeTransport(o);
  std::optional<absl::Status> ready;
  auto sub = transport_->Subscribe("ch", [](absl::string_view, absl::string_view) {},
                                   [&](absl::Status s) { ready = s; });
  ASSERT_THAT(sub, IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return ready.has_value(); }));
  EXPECT_THAT(*ready, StatusIs(absl::StatusCode::kUnavailable));
  // Commands are unaffected.
  EXPECT_THAT(Call({"PING"}), IsOkAndHolds(Reply::Status("PONG")));
}

TEST_F(HiredisTransportAuthTest, NoPasswordGetsTheServersErrorReply) {
  MakeTransport(Options());
  absl::StatusOr<Reply> r = Call({"PING"});
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->IsErrorWithPrefix("NOAUTH")) << *r;
}

TEST_F(HiredisTransportTest, ConnectTimesOutWhenTheHandshakeHangs) {
  ASSERT_THAT(server_->Pause(), IsOk());  // the kernel still accepts the TCP connection
  HiredisTransportOptions o = Options();
  o.db = 1;  // SELECT never answered
  o.connect_timeout = absl::Milliseconds(200);
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(server_->Resume(), IsOk());
}

TEST_F(HiredisTransportTest, RefusedPortFailsWithUnavailable) {
  HiredisTransportOptions o = Options();
  ASSERT_THAT(server_->Kill(), IsOk());  // nothing listens on this port now
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Call({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(HiredisTransportTest, UnknownHostFailsWithUnavailable) {
  HiredisTransportOptions o = Options();
  o.host = "no-such-host.invalid";
  MakeTransport(o);
  EXPECT_THAT(ConnectAndWait(*transport_), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(HiredisTransportTest, BadArgumentsAreRejectedAndTheCallbackNeverRuns) {
  MakeTransport(Options());
  bool ran = false;
  auto cb = [&](absl::StatusOr<Reply>) { ran = true; };
  EXPECT_THAT(transport_->Send({}, kLong, cb), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Send({"PING"}, absl::ZeroDuration(), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Send({"subscribe", "ch"}, kLong, cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Send({"PING"}, kLong, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Subscribe("ch", nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.RunFor(absl::Milliseconds(20));
  EXPECT_FALSE(ran);

  HiredisTransportOptions bad = Options();
  bad.port = 0;
  EXPECT_THAT(HiredisTransport::Create(loop_.get(), bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = Options();
  bad.host = "";
  EXPECT_THAT(HiredisTransport::Create(loop_.get(), bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = Options();
  bad.username = "alice";
  EXPECT_THAT(HiredisTransport::Create(loop_.get(), bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HiredisTransport::Create(nullptr, Options()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(HiredisTransportTest, SeveralSubscriptionsToAChannelEachGetEveryMessage) {
  MakeTransport(Options());
  std::vector<std::string> a, b;
  int ready = 0;
  auto sa = transport_->Subscribe(
      "ch", [&](absl::string_view, absl::string_view m) { a.emplace_back(m); },
      [&](absl::Status s) { EXPECT_THAT(s, IsOk()); ++ready; });
  auto sb = transport_->Subscribe(
      "ch", [&](absl::string_view, absl::string_view m) { b.emplace_back(m); },
      [&](absl::Status s) { EXPECT_THAT(s, IsOk()); ++ready; });
  ASSERT_THAT(sa, IsOk());
  ASSERT_THAT(sb, IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return ready == 2; }));
  // One SUBSCRIBE on the server for both.
  EXPECT_THAT(server_->Command({"PUBSUB", "NUMSUB", "ch"}),
              IsOkAndHolds(Reply::Array({Reply::String("ch"), Reply::Integer(1)})));
  ASSERT_THAT(server_->Command({"PUBLISH", "ch", "1"}), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return a.size() == 1 && b.size() == 1; }));

  sa->reset();  // unsubscribes a only
  ASSERT_THAT(server_->Command({"PUBLISH", "ch", "2"}), IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(loop_.RunUntil([&] { return b.size() == 2; }));
  EXPECT_THAT(a, ElementsAre("1"));
  EXPECT_THAT(b, ElementsAre("1", "2"));

  // A third subscription to the live channel is ready at once.
  bool third_ready = false;
  auto sc = transport_->Subscribe("ch", [](absl::string_view, absl::string_view) {},
                                  [&](absl::Status s) { third_ready = s.ok(); });
  ASSERT_TRUE(loop_.RunUntil([&] { return third_ready; }));

  sb->reset();
  sc->reset();
  // The last one gone, the channel is unsubscribed on the server.
  bool gone = false;
  EXPECT_TRUE(RunUntilPoking([&] { return gone; }, [&] {
    gone = server_->Command({"PUBSUB", "NUMSUB", "ch"}).value_or(Reply()) ==
           Reply::Array({Reply::String("ch"), Reply::Integer(0)});
  }));
}

TEST_F(HiredisTransportTest, ResubscribingWhileAnUnsubscribeIsInFlightWorks) {
  MakeTransport(Options());
  bool first_ready = false;
  auto first = transport_->Subscribe("ch", [](absl::string_view, absl::string_view) {},
                                     [&](absl::Status s) { first_ready = s.ok(); });
  ASSERT_THAT(first, IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return first_ready; }));
  first->reset();  // UNSUBSCRIBE goes out on the next write
  std::vector<std::string> got;
  std::optional<absl::Status> ready;
  auto second = transport_->Subscribe(
      "ch", [&](absl::string_view, absl::string_view m) { got.emplace_back(m); },
      [&](absl::Status s) { ready = s; });
  ASSERT_THAT(second, IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return ready.has_value(); }));
  ASSERT_THAT(*ready, IsOk());
  ASSERT_THAT(server_->Command({"PUBLISH", "ch", "hello"}), IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(loop_.RunUntil([&] { return !got.empty(); }));
  EXPECT_THAT(got, ElementsAre("hello"));
}

// The threaded pattern: the transport lives on a UvLoopThread and is created,
// used and destroyed only in posted functions.
TEST(HiredisTransportOnLoopThreadTest, CommandsRunOnTheLoopThread) {
  auto server = RedisServer::Start();
  ASSERT_THAT(server, IsOk());
  auto thread = std::make_unique<UvLoopThread>();
  std::unique_ptr<HiredisTransport> transport;  // touched on the loop thread only
  std::promise<absl::StatusOr<Reply>> reply;
  const int port = (*server)->port();
  thread->Post([&] {
    HiredisTransportOptions o;
    o.port = port;
    auto t = HiredisTransport::Create(thread->uv_loop(), o);
    if (!t.ok()) {
      reply.set_value(t.status());
      return;
    }
    transport = std::move(*t);
    absl::Status s = transport->Send({"ECHO", "hi"}, kLong, [&](absl::StatusOr<Reply> r) {
      EXPECT_TRUE(thread->InLoopThread());
      reply.set_value(std::move(r));
    });
    if (!s.ok()) reply.set_value(s);
  });
  auto f = reply.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_THAT(f.get(), IsOkAndHolds(Reply::String("hi")));
  thread->Post([&] { transport.reset(); });
  thread.reset();  // joins; the loop closed clean (else it would report)
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

// Send's argument check (HiredisTransport and TlsTransport): commands that
// change the connection's protocol are refused in any case, others pass.
TEST(ValidateSendArgumentsTest, RefusesProtocolChangingCommandsOnly) {
  for (const char* cmd : {"SUBSCRIBE", "psubscribe", "Unsubscribe", "PUNSUBSCRIBE",
                          "monitor", "SSUBSCRIBE", "sunsubscribe"}) {
    EXPECT_EQ(ValidateSendArguments(1, cmd, absl::Seconds(1), true).code(),
              absl::StatusCode::kInvalidArgument)
        << cmd;
  }
  for (const char* cmd : {"SET", "PUBLISH", "SCRIPT", "MSET", "UNLINK", "SUBSCRIBER",
                          "MONITORS", "PING", "EVALSHA", "SSUBSCRIB"}) {
    EXPECT_TRUE(ValidateSendArguments(1, cmd, absl::Seconds(1), true).ok()) << cmd;
  }
  EXPECT_EQ(ValidateSendArguments(0, "", absl::Seconds(1), true).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace

namespace test_support {
INSTANTIATE_TYPED_TEST_SUITE_P(Hiredis, TransportContractTest, ::testing::Types<HiredisKind>);
}  // namespace test_support
}  // namespace dlock
