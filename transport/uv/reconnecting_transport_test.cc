// ReconnectingTransport over a scripted RedisLink: the shared core of
// HiredisTransport and TlsTransport on its own, with no server and no
// hiredis -- the test plays the link (open, replies, loss) and checks what
// the core writes and calls back. The real links are covered by
// hiredis_transport_test and tls_transport_test.
#include "dlock/transport/uv/reconnecting_transport.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What one link saw; kept after the core destroyed the link.
struct LinkRecord {
  LinkEvents* events = nullptr;
  std::vector<std::string> writes;  // each command's argv joined by ' '
  bool live = true;
};

class ScriptedLink : public RedisLink {
 public:
  explicit ScriptedLink(LinkRecord* record) : record_(record) {}
  ~ScriptedLink() override { record_->live = false; }
  bool Write(absl::Span<const absl::string_view> argv) override {
    record_->writes.push_back(absl::StrJoin(argv, " "));
    return true;
  }
  std::string TimeoutMessage(absl::Duration) const override { return "scripted timeout"; }

 private:
  LinkRecord* const record_;
};

class ScriptedTransport : public ReconnectingTransport {
 public:
  ScriptedTransport(uv_loop_s* loop, const HiredisTransportOptions& options,
                    std::deque<LinkRecord>* links)
      : ReconnectingTransport(loop, options, /*ping_on_setup=*/false), links_(links) {
    Start();
  }
  ~ScriptedTransport() override { Close(); }

 private:
  absl::StatusOr<std::unique_ptr<RedisLink>> OpenLink(const std::string&,
                                                      LinkEvents* events) override {
    links_->emplace_back();
    links_->back().events = events;
    return std::unique_ptr<RedisLink>(new ScriptedLink(&links_->back()));
  }
  std::deque<LinkRecord>* const links_;
};

Reply Push(const std::string& kind, const std::string& channel, Reply last) {
  return Reply::Array({Reply::String(kind), Reply::String(channel), std::move(last)});
}

class ReconnectingTransportTest : public ::testing::Test {
 protected:
  void TearDown() override {
    transport_.reset();
    EXPECT_EQ(loop_.Close(), 0);
  }
  void Make(HiredisTransportOptions o = {}) {
    o.host = "127.0.0.1";  // a literal: no lookup, the link opens at once
    o.reconnect_backoff_min = absl::Milliseconds(5);
    o.reconnect_backoff_max = absl::Milliseconds(5);
    ASSERT_THAT(ValidateConnectionOptions(o), IsOk());
    transport_ = std::make_unique<ScriptedTransport>(loop_.get(), o, &links_);
  }
  // The link replies (one read), then its batch of input ends.
  void Read(LinkRecord& link, std::vector<Reply> replies) {
    for (Reply& r : replies) link.events->OnLinkReply(std::move(r));
    link.events->AfterLinkIo();
  }

  test_support::UvTestLoop loop_;
  std::deque<LinkRecord> links_;
  std::unique_ptr<ScriptedTransport> transport_;
};

TEST_F(ReconnectingTransportTest, CommandsWaitForTheHandshakeAndRepliesReturnInOrder) {
  HiredisTransportOptions o;
  o.password = "pw";
  o.db = 2;
  Make(o);
  ASSERT_EQ(links_.size(), 1u);
  std::vector<std::string> got;
  for (const char* key : {"a", "b"}) {
    ASSERT_THAT(transport_->Send({"GET", key}, absl::Seconds(5),
                                 [&](absl::StatusOr<Reply> r) {
                                   ASSERT_THAT(r, IsOk());
                                   got.push_back(r->str);
                                 }),
                IsOk());
  }
  EXPECT_TRUE(links_[0].writes.empty());  // not open yet
  links_[0].events->OnLinkOpen();
  EXPECT_THAT(links_[0].writes, ElementsAre("AUTH pw", "SELECT 2"));
  EXPECT_FALSE(transport_->connected());
  Read(links_[0], {Reply::Status("OK"), Reply::Status("OK")});
  EXPECT_TRUE(transport_->connected());
  EXPECT_EQ(transport_->connection_epoch(), 1u);
  EXPECT_THAT(links_[0].writes, ElementsAre("AUTH pw", "SELECT 2", "GET a", "GET b"));
  links_[0].events->OnLinkReply(Reply::String("1"));
  links_[0].events->OnLinkReply(Reply::String("2"));
  EXPECT_TRUE(got.empty());  // delivered once the read is over
  links_[0].events->AfterLinkIo();
  EXPECT_THAT(got, ElementsAre("1", "2"));
  EXPECT_EQ(transport_->pending_commands(), 0u);
}

TEST_F(ReconnectingTransportTest, TimedOutCommandsLateReplyIsDroppedAndOrderKept) {
  Make();
  links_[0].events->OnLinkOpen();
  ASSERT_TRUE(transport_->connected());
  std::optional<absl::StatusOr<Reply>> slow, next;
  ASSERT_THAT(transport_->Send({"GET", "slow"}, absl::Milliseconds(20),
                               [&](absl::StatusOr<Reply> r) { slow = std::move(r); }),
              IsOk());
  ASSERT_THAT(transport_->Send({"GET", "next"}, absl::Seconds(5),
                               [&](absl::StatusOr<Reply> r) { next = std::move(r); }),
              IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return slow.has_value(); }));
  EXPECT_THAT(*slow, StatusIs(absl::StatusCode::kDeadlineExceeded));
  Read(links_[0], {Reply::String("late"), Reply::String("right")});
  EXPECT_THAT(*next, IsOkAndHolds(Reply::String("right")));
}

TEST_F(ReconnectingTransportTest, QuickLossFailsInFlightBacksOffThenReconnects) {
  Make();
  links_[0].events->OnLinkOpen();
  std::optional<absl::StatusOr<Reply>> inflight, during_backoff;
  ASSERT_THAT(transport_->Send({"GET", "k"}, absl::Seconds(5),
                               [&](absl::StatusOr<Reply> r) { inflight = std::move(r); }),
              IsOk());
  links_[0].events->OnLinkLost(absl::UnavailableError("scripted loss"));
  EXPECT_FALSE(links_[0].live);
  EXPECT_FALSE(inflight.has_value());  // never inside the link's callback
  // Lost less than a second after it became ready: backoff, fail fast.
  ASSERT_THAT(transport_->Send({"GET", "k"}, absl::Seconds(5),
                               [&](absl::StatusOr<Reply> r) { during_backoff = std::move(r); }),
              IsOk());
  EXPECT_FALSE(during_backoff.has_value());
  ASSERT_TRUE(loop_.RunUntil([&] { return links_.size() == 2; }));
  EXPECT_THAT(*inflight, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("scripted loss")));
  EXPECT_THAT(*during_backoff, StatusIs(absl::StatusCode::kUnavailable));
  links_[1].events->OnLinkOpen();
  EXPECT_EQ(transport_->connection_epoch(), 2u);
}

TEST_F(ReconnectingTransportTest, RefusedHandshakeFailsConnectAndDropsTheLink) {
  HiredisTransportOptions o;
  o.password = "wrong";
  Make(o);
  std::optional<absl::Status> connected;
  ASSERT_THAT(transport_->Connect([&](absl::Status s) { connected = s; }), IsOk());
  links_[0].events->OnLinkOpen();
  Read(links_[0], {Reply::Error("WRONGPASS invalid username-password pair")});
  ASSERT_TRUE(loop_.RunUntil([&] { return connected.has_value(); }));
  EXPECT_THAT(*connected, StatusIs(absl::StatusCode::kUnavailable,
                                   AllOf(HasSubstr("AUTH failed"), HasSubstr("WRONGPASS"))));
  EXPECT_FALSE(links_[0].live);
  EXPECT_THAT(transport_->last_error(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ReconnectingTransportTest, PubSubConfirmsDeliversAndResubscribesAfterReconnect) {
  Make();
  std::optional<absl::Status> ready;
  std::vector<std::string> messages;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = transport_->Subscribe(
      "ch", [&](absl::string_view, absl::string_view m) { messages.emplace_back(m); },
      [&](absl::Status s) { ready = s; });
  ASSERT_THAT(sub, IsOk());
  ASSERT_EQ(links_.size(), 2u);  // the command link, then the pub/sub one
  LinkRecord& first = links_[1];
  first.events->OnLinkOpen();
  EXPECT_THAT(first.writes, ElementsAre("SUBSCRIBE ch"));
  Read(first, {Push("subscribe", "ch", Reply::Integer(1)),
               Push("message", "ch", Reply::String("hello"))});
  EXPECT_FALSE(ready.has_value());  // on a later loop turn
  ASSERT_TRUE(loop_.RunUntil([&] { return !messages.empty(); }));
  EXPECT_THAT(ready, ::testing::Optional(IsOk()));
  EXPECT_THAT(messages, ElementsAre("hello"));
  first.events->OnLinkLost(absl::UnavailableError("scripted loss"));
  ASSERT_TRUE(loop_.RunUntil([&] { return links_.size() == 3; }));
  links_[2].events->OnLinkOpen();
  EXPECT_THAT(links_[2].writes, ElementsAre("SUBSCRIBE ch"));
  // Last subscriber gone: UNSUBSCRIBE once confirmed on this connection.
  Read(links_[2], {Push("subscribe", "ch", Reply::Integer(1))});
  sub->reset();
  EXPECT_THAT(links_[2].writes, ElementsAre("SUBSCRIBE ch", "UNSUBSCRIBE ch"));
}

TEST_F(ReconnectingTransportTest, CloseCancelsEverythingInsideTheCall) {
  Make();
  std::vector<absl::Status> got;
  ASSERT_THAT(transport_->Send({"GET", "k"}, absl::Seconds(5),
                               [&](absl::StatusOr<Reply> r) { got.push_back(r.status()); }),
              IsOk());
  ASSERT_THAT(transport_->Connect([&](absl::Status s) { got.push_back(s); }), IsOk());
  transport_->Close();
  EXPECT_THAT(got, ElementsAre(StatusIs(absl::StatusCode::kCancelled),
                               StatusIs(absl::StatusCode::kCancelled)));
  EXPECT_FALSE(links_[0].live);
  EXPECT_THAT(transport_->Send({"GET", "k"}, absl::Seconds(5), [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace dlock
