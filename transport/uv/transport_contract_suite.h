// This header defines the contract tests every libuv transport to one
// redis-server must pass, written once and run per transport: a typed test
// suite `TransportContractTest<Kind>`. A kind names the transport and the
// server and knows how to start one and connect the other:
//
//   struct HiredisKind {
//     using Server = test_support::RedisServer;
//     using ServerOptions = test_support::RedisServerOptions;
//     using Transport = HiredisTransport;
//     using Options = HiredisTransportOptions;
//     static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions o);
//     static test_support::RedisServer& Data(Server& s);  // plain access
//     static Options DefaultOptions(Server& s);  // fast reconnects
//     static absl::StatusOr<std::unique_ptr<Transport>> Create(uv_loop_t*, Options);
//   };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Hiredis, TransportContractTest,
//                                  ::testing::Types<HiredisKind>);
//
// What is checked: replies stay matched to their commands (pipelining,
// deadlines of commands the server has not answered), callbacks never run
// inside the call that made them, Close() cancels everything pending
// exactly once, a transport may be destroyed in its own callback, scripts
// keep command order whatever the script cache holds, and subscriptions
// survive a server restart and may end inside their own callback. Every
// test ends with uv_loop_close() == 0. Transport-specific behaviour
// (reconnect backoff, TLS verification, Unix sockets) stays in each
// transport's own test file, whose fixture can derive from the same
// `UvTransportFixture<Kind>`.
#ifndef DLOCK_TRANSPORT_UV_TRANSPORT_CONTRACT_SUITE_H_
#define DLOCK_TRANSPORT_UV_TRANSPORT_CONTRACT_SUITE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/script_order_check.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace test_support {

// One server of `Kind`, a UvTestLoop and (after MakeTransport) one
// transport; TearDown destroys the transport and expects the loop to close
// with nothing leaked.
template <typename Kind>
class UvTransportFixture : public ::testing::Test {
 protected:
  static constexpr absl::Duration kLong = absl::Seconds(10);

  void SetUp() override { StartServer({}); }

  void TearDown() override {
    transport_.reset();
    EXPECT_EQ(loop_.Close(), 0);
  }

  // Replaces the server with a new one started with `options`.
  void StartServer(typename Kind::ServerOptions options) {
    server_.reset();
    auto server = Kind::Start(std::move(options));
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
  }

  // Plain (synchronous) access to the server, for setup and inspection.
  RedisServer& server() { return Kind::Data(*server_); }

  // Options for the server, with fast reconnects.
  typename Kind::Options Options() { return Kind::DefaultOptions(*server_); }

  void MakeTransport(typename Kind::Options options) {
    auto t = Kind::Create(loop_.get(), std::move(options));
    ASSERT_THAT(t, IsOk());
    transport_ = std::move(*t);
  }
  void MakeTransport() { MakeTransport(Options()); }

  // Connect() and wait for its outcome.
  absl::Status ConnectAndWait(Transport& t) {
    std::optional<absl::Status> result;
    absl::Status s = t.Connect([&](absl::Status st) { result = std::move(st); });
    if (!s.ok()) return s;
    if (!loop_.RunUntil([&] { return result.has_value(); })) {
      return absl::InternalError("Connect never called back");
    }
    return *result;
  }

  // Sends one command and runs the loop until it is answered.
  absl::StatusOr<Reply> Call(std::vector<std::string> argv, absl::Duration timeout = kLong) {
    std::optional<absl::StatusOr<Reply>> result;
    absl::Status s = transport_->Send(std::move(argv), timeout,
                                      [&](absl::StatusOr<Reply> r) { result = std::move(r); });
    if (!s.ok()) return s;
    if (!loop_.RunUntil([&] { return result.has_value(); })) {
      return absl::InternalError("no callback");
    }
    return *result;
  }

  // Runs the loop until `done()`, calling `poke()` now and every `every`
  // (e.g. to PUBLISH again until a resubscribed listener hears it).
  bool RunUntilPoking(const std::function<bool()>& done, const std::function<void()>& poke,
                      absl::Duration every = absl::Milliseconds(20)) {
    UvEventLoop ticker(loop_.get());
    std::function<void()> tick = [&] {
      poke();
      ticker.RunAfter(every, tick);
    };
    tick();
    return loop_.RunUntil(done);
  }

  UvTestLoop loop_;
  std::unique_ptr<typename Kind::Server> server_;
  std::unique_ptr<typename Kind::Transport> transport_;
};

template <typename Kind>
class TransportContractTest : public UvTransportFixture<Kind> {};

TYPED_TEST_SUITE_P(TransportContractTest);

TYPED_TEST_P(TransportContractTest, TenThousandPipelinedCommandsAreAnsweredInOrder) {
  this->MakeTransport();
  ASSERT_THAT(this->ConnectAndWait(*this->transport_), IsOk());
  constexpr int kCount = 10000;
  std::vector<int64_t> seen;
  seen.reserve(kCount);
  int errors = 0;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_THAT(this->transport_->Send({"INCR", "counter"}, this->kLong,
                                       [&](absl::StatusOr<Reply> r) {
                                         if (r.ok() && r->is_integer()) {
                                           seen.push_back(r->integer);
                                         } else {
                                           ++errors;
                                         }
                                       }),
                IsOk());
  }
  EXPECT_EQ(this->transport_->pending_commands(), static_cast<size_t>(kCount));
  ASSERT_TRUE(this->loop_.RunUntil([&] { return seen.size() + errors == kCount; }));
  EXPECT_EQ(errors, 0);
  for (int i = 0; i < kCount && i < static_cast<int>(seen.size()); ++i) {
    ASSERT_EQ(seen[i], i + 1);
  }
  EXPECT_EQ(this->transport_->pending_commands(), 0u);
}

TYPED_TEST_P(TransportContractTest, CallbackNeverRunsInsideSend) {
  this->MakeTransport();
  ASSERT_THAT(this->ConnectAndWait(*this->transport_), IsOk());
  bool ran = false;
  ASSERT_THAT(
      this->transport_->Send({"PING"}, this->kLong, [&](absl::StatusOr<Reply>) { ran = true; }),
      IsOk());
  EXPECT_FALSE(ran);
  ASSERT_TRUE(this->loop_.RunUntil([&] { return ran; }));
}

TYPED_TEST_P(TransportContractTest, DeadlineFiresWhilePausedAndLaterRepliesStayMatched) {
  this->MakeTransport();
  ASSERT_THAT(this->Call({"SET", "k", "v"}), IsOk());
  ASSERT_THAT(this->server().Pause(), IsOk());

  std::optional<absl::StatusOr<Reply>> short_one, long_one;
  ASSERT_THAT(this->transport_->Send({"GET", "k"}, absl::Milliseconds(100),
                                     [&](absl::StatusOr<Reply> r) { short_one = std::move(r); }),
              IsOk());
  ASSERT_THAT(this->transport_->Send({"INCR", "n"}, this->kLong,
                                     [&](absl::StatusOr<Reply> r) { long_one = std::move(r); }),
              IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return short_one.has_value(); }));
  EXPECT_THAT(*short_one, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_FALSE(long_one.has_value());
  EXPECT_EQ(this->transport_->pending_commands(), 1u);

  ASSERT_THAT(this->server().Resume(), IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return long_one.has_value(); }));
  // The late "v" of the timed-out GET was dropped, not handed to INCR.
  EXPECT_THAT(*long_one, IsOkAndHolds(Reply::Integer(1)));
  EXPECT_THAT(this->Call({"GET", "k"}), IsOkAndHolds(Reply::String("v")));
  EXPECT_THAT(this->Call({"INCR", "n"}), IsOkAndHolds(Reply::Integer(2)));
  EXPECT_EQ(this->transport_->pending_commands(), 0u);
}

TYPED_TEST_P(TransportContractTest, ScriptsKeepCommandOrderWhateverTheScriptCacheHolds) {
  this->MakeTransport();
  script_order_check::ExpectScriptsKeepOrderAcrossScriptFlush(
      *this->transport_, this->loop_,
      [this](std::vector<std::string> argv) { return this->server().Command(std::move(argv)); });
}

TYPED_TEST_P(TransportContractTest, TransactionsRunAsOneGroupInOrderWithOtherCommands) {
  this->MakeTransport();  // not connected yet: the first one waits, copied
  std::vector<std::string> order;
  std::optional<absl::StatusOr<Reply>> first, aborted, second;
  {
    std::string key = "tx";  // the views need to live only until the call returns
    const absl::string_view set[] = {"SET", key, "a"};
    const absl::string_view incr[] = {"INCR", "n"};
    const absl::string_view get[] = {"GET", key};
    const absl::Span<const absl::string_view> group[] = {set, incr, get};
    ASSERT_THAT(this->transport_->SendTransaction(group, this->kLong,
                                                  [&](absl::StatusOr<Reply> r) {
                                                    order.push_back("tx1");
                                                    first = std::move(r);
                                                  }),
                IsOk());
    key = "clobbered";
  }
  ASSERT_THAT(this->transport_->Send({"INCR", "n"}, this->kLong,
                                     [&](absl::StatusOr<Reply> r) {
                                       order.push_back("incr");
                                       EXPECT_THAT(r, IsOkAndHolds(Reply::Integer(2)));
                                     }),
              IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return order.size() == 2; }));
  EXPECT_THAT(order, ::testing::ElementsAre("tx1", "incr"));
  ASSERT_THAT(*first, IsOk());
  EXPECT_EQ(**first, Reply::Array({Reply::Status("OK"), Reply::Integer(1), Reply::String("a")}));

  // Connected: a queuing error aborts the whole group (nothing ran), and a
  // command's own error leaves the others run.
  const absl::string_view incr[] = {"INCR", "n"};
  const absl::string_view unknown[] = {"NOSUCHCOMMAND"};
  const absl::Span<const absl::string_view> bad[] = {incr, unknown};
  bool inside = true;
  ASSERT_THAT(this->transport_->SendTransaction(bad, this->kLong,
                                                [&](absl::StatusOr<Reply> r) {
                                                  EXPECT_FALSE(inside);
                                                  aborted = std::move(r);
                                                }),
              IsOk());
  inside = false;
  const absl::string_view wrong[] = {"INCR", "tx"};  // "a" is not an integer
  const absl::Span<const absl::string_view> mixed[] = {wrong, incr};
  ASSERT_THAT(this->transport_->SendTransaction(
                  mixed, this->kLong, [&](absl::StatusOr<Reply> r) { second = std::move(r); }),
              IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return second.has_value(); }));
  ASSERT_TRUE(aborted.has_value());
  ASSERT_THAT(*aborted, IsOk());
  // The group was discarded (nothing ran); the reply is the refusal that
  // caused it (the unknown command), not Redis's EXECABORT, which hides why.
  EXPECT_TRUE((*aborted)->IsErrorWithPrefix("ERR unknown command")) << **aborted;
  ASSERT_THAT(*second, IsOk());
  ASSERT_TRUE((*second)->is_array());
  ASSERT_EQ((*second)->elements.size(), 2u);
  EXPECT_TRUE((*second)->elements[0].is_error());
  EXPECT_EQ((*second)->elements[1], Reply::Integer(3));  // the aborted INCR never ran

  // Rejected at once: nothing, an empty command, a nested MULTI.
  const absl::string_view multi[] = {"MULTI"};
  const absl::Span<const absl::string_view> nested[] = {multi};
  EXPECT_THAT(this->transport_->SendTransaction({}, this->kLong, [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      this->transport_->SendTransaction(nested, this->kLong, [](absl::StatusOr<Reply>) {}),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->Call({"GET", "n"}), IsOkAndHolds(Reply::String("3")));
  EXPECT_EQ(this->transport_->pending_commands(), 0u);
}

TYPED_TEST_P(TransportContractTest, CloseCancelsEverythingPendingExactlyOnce) {
  this->MakeTransport();
  ASSERT_THAT(this->ConnectAndWait(*this->transport_), IsOk());
  ASSERT_THAT(this->server().Pause(), IsOk());
  std::vector<absl::Status> results;
  for (int i = 0; i < 5; ++i) {
    ASSERT_THAT(
        this->transport_->Send({"INCR", "n"}, this->kLong,
                               [&](absl::StatusOr<Reply> r) { results.push_back(r.status()); }),
        IsOk());
  }
  std::optional<absl::Status> ready;
  auto sub = this->transport_->Subscribe("ch", [](absl::string_view, absl::string_view) {},
                                         [&](absl::Status s) { ready = s; });
  ASSERT_THAT(sub, IsOk());
  this->transport_->Close();
  ASSERT_EQ(results.size(), 5u);  // synchronously, inside Close
  for (const absl::Status& s : results) EXPECT_THAT(s, StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(ready.has_value());
  EXPECT_THAT(*ready, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(this->transport_->Send({"PING"}, this->kLong, [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kCancelled));
  this->loop_.RunFor(absl::Milliseconds(20));
  EXPECT_EQ(results.size(), 5u);
  ASSERT_THAT(this->server().Resume(), IsOk());
  sub->reset();  // after Close: harmless
}

TYPED_TEST_P(TransportContractTest, TransportMayBeDestroyedInsideItsCallback) {
  this->MakeTransport();
  bool second = false;
  ASSERT_THAT(this->transport_->Send({"PING"}, this->kLong,
                                     [&](absl::StatusOr<Reply>) { this->transport_.reset(); }),
              IsOk());
  ASSERT_THAT(this->transport_->Send({"PING"}, this->kLong,
                                     [&](absl::StatusOr<Reply> r) {
                                       second = true;
                                       EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
                                     }),
              IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return this->transport_ == nullptr; }));
  EXPECT_TRUE(second);
}

TYPED_TEST_P(TransportContractTest, SubscriptionReceivesMessagesAndSurvivesRestart) {
  this->MakeTransport();
  std::vector<std::string> got;
  std::optional<absl::Status> ready;
  const std::string channel("ch\0bin", 6);
  auto sub = this->transport_->Subscribe(
      channel,
      [&](absl::string_view ch, absl::string_view msg) {
        EXPECT_EQ(ch, channel);
        got.emplace_back(msg);
      },
      [&](absl::Status s) { ready = s; });
  ASSERT_THAT(sub, IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return ready.has_value(); }));
  ASSERT_THAT(*ready, IsOk());
  ASSERT_THAT(this->server().Command({"PUBLISH", channel, std::string("m\0 1", 4)}),
              IsOkAndHolds(Reply::Integer(1)));
  ASSERT_TRUE(this->loop_.RunUntil([&] { return got.size() == 1; }));
  EXPECT_EQ(got[0], std::string("m\0 1", 4));

  ASSERT_THAT(this->server().Kill(), IsOk());
  ASSERT_THAT(this->server().Restart(), IsOk());
  // Publish until the automatically resubscribed listener hears one.
  ASSERT_TRUE(this->RunUntilPoking(
      [&] { return got.size() >= 2; },
      [&] { this->server().Command({"PUBLISH", channel, "m2"}).IgnoreError(); }));
  EXPECT_EQ(got[1], "m2");

  // Unsubscribed: the server forgets the channel.
  sub->reset();
  ASSERT_TRUE(this->RunUntilPoking(
      [&] {
        auto r = this->server().Command({"PUBSUB", "NUMSUB", channel});
        return r.ok() && r->is_array() && r->elements.size() == 2 &&
               r->elements[1].integer == 0;
      },
      [] {}));
}

TYPED_TEST_P(TransportContractTest, SubscriberMayUnsubscribeInsideItsOwnCallback) {
  this->MakeTransport();
  std::unique_ptr<Subscription> sub;
  int calls = 0;
  std::optional<absl::Status> ready;
  auto s = this->transport_->Subscribe(
      "ch",
      [&](absl::string_view, absl::string_view) {
        ++calls;
        sub.reset();
      },
      [&](absl::Status st) { ready = st; });
  ASSERT_THAT(s, IsOk());
  sub = std::move(*s);
  ASSERT_TRUE(this->loop_.RunUntil([&] { return ready.has_value(); }));
  ASSERT_THAT(*ready, IsOk());
  ASSERT_THAT(this->server().Command({"PUBLISH", "ch", "1"}), IsOk());
  ASSERT_THAT(this->server().Command({"PUBLISH", "ch", "2"}), IsOk());
  ASSERT_TRUE(this->loop_.RunUntil([&] { return calls >= 1; }));
  this->loop_.RunFor(absl::Milliseconds(50));
  EXPECT_EQ(calls, 1);
}

REGISTER_TYPED_TEST_SUITE_P(TransportContractTest,
                            TenThousandPipelinedCommandsAreAnsweredInOrder,
                            CallbackNeverRunsInsideSend,
                            DeadlineFiresWhilePausedAndLaterRepliesStayMatched,
                            ScriptsKeepCommandOrderWhateverTheScriptCacheHolds,
                            TransactionsRunAsOneGroupInOrderWithOtherCommands,
                            CloseCancelsEverythingPendingExactlyOnce,
                            TransportMayBeDestroyedInsideItsCallback,
                            SubscriptionReceivesMessagesAndSurvivesRestart,
                            SubscriberMayUnsubscribeInsideItsOwnCallback);

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TRANSPORT_CONTRACT_SUITE_H_
