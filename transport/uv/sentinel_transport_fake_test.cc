// SentinelTransport's logic in virtual time, over scripted connections (no
// processes): only a server whose ROLE says master is used, commands in
// flight when the master changes fail with kUnavailable and are never
// re-sent, READONLY and +switch-master start a rediscovery, subscriptions
// move to the new master, and the errors name each sentinel's answer.
#include "dlock/transport/uv/sentinel_transport.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One scripted server: a sentinel (answers get-master-addr-by-name with
// `names`), or a data node (answers ROLE with `role`, writes with OK, or
// READONLY when `readonly`). `hold` keeps replies back until released.
struct Node {
  bool sentinel = false;
  std::string names;  // "host:port", "" for nil
  std::string role = "master";
  bool readonly = false;
  bool hold = false;
  std::vector<std::vector<std::string>> received;
  std::vector<std::string> subscribed;
  std::vector<MessageCallback*> listeners;
};

class ScriptedTransport : public Transport {
 public:
  ScriptedTransport(EventLoop* loop, Node* node) : loop_(loop), node_(node) {}
  ~ScriptedTransport() override { Close(); }

  absl::Status Send(std::vector<std::string> argv, absl::Duration,
                    ReplyCallback callback) override {
    if (closed_) return absl::CancelledError("closed");
    node_->received.push_back(argv);
    Reply reply = Answer(argv);
    const uint64_t id = next_++;
    pending_.emplace(id, std::make_pair(std::move(reply), std::move(callback)));
    if (!node_->hold) Deliver(id);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override {
    node_->subscribed.push_back(channel);
    auto sub = std::make_unique<Sub>(node_, std::move(on_message));
    loop_->RunAfter(absl::ZeroDuration(), [r = std::move(on_ready)]() mutable {
      std::move(r)(absl::OkStatus());
    });
    return std::unique_ptr<Subscription>(std::move(sub));
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : pending) std::move(p.second)(absl::CancelledError("closed"));
  }
  bool connected() const override { return !closed_; }

  // Delivers every held reply (in order).
  void ReleaseHeld() {
    std::vector<uint64_t> ids;
    for (auto& [id, p] : pending_) ids.push_back(id);
    for (uint64_t id : ids) Deliver(id);
  }

 private:
  struct Sub : Subscription {
    Sub(Node* n, MessageCallback cb) : node(n), on_message(std::move(cb)) {
      node->listeners.push_back(&on_message);
    }
    ~Sub() override {
      auto& l = node->listeners;
      l.erase(std::remove(l.begin(), l.end(), &on_message), l.end());
    }
    Node* node;
    MessageCallback on_message;
  };

  Reply Answer(const std::vector<std::string>& argv) {
    if (node_->sentinel) {
      if (node_->names.empty()) return Reply::Nil();
      const size_t colon = node_->names.rfind(':');
      return Reply::Array({Reply::String(node_->names.substr(0, colon)),
                           Reply::String(node_->names.substr(colon + 1))});
    }
    if (argv[0] == "ROLE") {
      return Reply::Array({Reply::String(node_->role), Reply::Integer(0)});
    }
    if (node_->readonly) {
      return Reply::Error("READONLY You can't write against a read only replica.");
    }
    return Reply::Status("OK");
  }

  void Deliver(uint64_t id) {
    loop_->RunAfter(absl::ZeroDuration(), [this, id] {
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      auto p = std::move(it->second);
      pending_.erase(it);
      std::move(p.second)(std::move(p.first));
    });
  }

  EventLoop* loop_;
  Node* node_;
  bool closed_ = false;
  uint64_t next_ = 1;
  std::map<uint64_t, std::pair<Reply, ReplyCallback>> pending_;
};

class SentinelTransportFakeTest : public ::testing::Test {
 protected:
  SentinelTransportFakeTest() {
    nodes_["s1:26379"].sentinel = true;
    nodes_["s2:26379"].sentinel = true;
  }

  std::unique_ptr<SentinelTransport> Make() {
    SentinelTransportOptions o;
    o.sentinels = {{"s1", 26379}, {"s2", 26379}};
    o.master_name = "mymaster";
    absl::StatusOr<std::unique_ptr<SentinelTransport>> t = SentinelTransport::Create(
        &loop_, o,
        [this](const std::string& host, int port,
               bool) -> absl::StatusOr<std::unique_ptr<Transport>> {
          Node* node = &nodes_[absl::StrCat(host, ":", port)];
          auto t = std::make_unique<ScriptedTransport>(&loop_, node);
          connections_[node].push_back(t.get());
          return std::unique_ptr<Transport>(std::move(t));
        });
    EXPECT_THAT(t, IsOk());
    return t.ok() ? *std::move(t) : nullptr;
  }

  absl::Status ConnectNow(SentinelTransport& t) {
    std::optional<absl::Status> out;
    absl::Status s = t.Connect([&](absl::Status st) { out = st; });
    if (!s.ok()) return s;
    loop_.RunUntilIdle();
    return out.value_or(absl::UnknownError("no answer"));
  }

  // Writes sent to a data node (not ROLE).
  std::vector<std::string> Writes(const std::string& node) {
    std::vector<std::string> out;
    for (const auto& argv : nodes_[node].received) {
      if (argv[0] != "ROLE") out.push_back(argv[1]);
    }
    return out;
  }

  void Announce(const std::string& message) {
    for (auto* cb : std::vector<MessageCallback*>(nodes_["s1:26379"].listeners)) {
      (*cb)("+switch-master", message);
    }
  }

  ManualEventLoop loop_;
  std::map<std::string, Node> nodes_;
  std::map<Node*, std::vector<ScriptedTransport*>> connections_;
};

TEST_F(SentinelTransportFakeTest, UsesOnlyAServerWhoseRoleIsMaster) {
  nodes_["s1:26379"].names = "r:6380";  // a stale sentinel names a replica
  nodes_["r:6380"].role = "slave";
  nodes_["s2:26379"].names = "m:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  EXPECT_EQ(t->master_address(), "m:6379");
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "k", "v"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_THAT(Writes("m:6379"), ElementsAre("k"));
  EXPECT_TRUE(Writes("r:6380").empty());
}

TEST_F(SentinelTransportFakeTest, NoMasterIsAnUnavailableNamingEverySentinelsAnswer) {
  nodes_["s1:26379"].names = "";  // does not know the name
  nodes_["s2:26379"].names = "r:6380";
  nodes_["r:6380"].role = "slave";
  auto t = Make();
  absl::Status s = ConnectNow(*t);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("sentinel s1:26379: knows no master named 'mymaster'"));
  EXPECT_THAT(s.message(), HasSubstr("sentinel s2:26379: names r:6380, not a master: ROLE says slave"));
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "k", "v"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  EXPECT_FALSE(r.has_value());  // never inside Send
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Writes("r:6380").empty());
  // Rounds repeat in the background: once a master exists, it is found.
  nodes_["s2:26379"].names = "m:6379";
  loop_.AdvanceTime(absl::Seconds(3));
  EXPECT_TRUE(t->connected());
  EXPECT_EQ(t->master_address(), "m:6379");
}

TEST_F(SentinelTransportFakeTest, InFlightCommandsFailUnavailableOnSwitchAndAreNotResent) {
  nodes_["s1:26379"].names = "m1:6379";
  nodes_["s2:26379"].names = "m1:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  nodes_["m1:6379"].hold = true;
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"EVALSHA", "lock-script"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_FALSE(r.has_value());
  // Failover: the sentinels now name m2, and say so.
  nodes_["s1:26379"].names = "m2:6379";
  nodes_["s2:26379"].names = "m2:6379";
  Announce("mymaster 127.0.0.1 6379 127.0.0.1 6380");
  loop_.RunUntilIdle();
  EXPECT_EQ(t->master_address(), "m2:6379");
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r->status().message(), HasSubstr("master changed"));
  EXPECT_TRUE(Writes("m2:6379").empty());
  EXPECT_EQ(t->master_changes(), 2u);
}

TEST_F(SentinelTransportFakeTest, SwitchNoticeForAnotherMasterIsIgnored) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  const size_t asked = nodes_["s1:26379"].received.size();
  Announce("othermaster 127.0.0.1 1 127.0.0.1 2");
  loop_.RunUntilIdle();
  EXPECT_EQ(nodes_["s1:26379"].received.size(), asked);
}

TEST_F(SentinelTransportFakeTest, ReadOnlyReplyStartsARediscovery) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  // m1 was demoted and no notice reached us.
  nodes_["m1:6379"].readonly = true;
  nodes_["m1:6379"].role = "slave";
  nodes_["s1:26379"].names = "m2:6379";
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "a", "1"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(*r, IsOk());
  EXPECT_TRUE((*r)->is_error());  // the READONLY reply itself is passed on
  EXPECT_EQ(t->master_address(), "m2:6379");
  ASSERT_THAT(t->Send({"SET", "b", "1"}, absl::Seconds(1), [](absl::StatusOr<Reply>) {}),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(Writes("m2:6379"), ElementsAre("b"));
}

TEST_F(SentinelTransportFakeTest, DemotedMasterIsDroppedWhenRoleSaysSlave) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  // A stale sentinel still names m1, which is now a replica.
  nodes_["m1:6379"].role = "slave";
  Announce("mymaster x 1 y 2");
  loop_.RunUntilIdle();
  EXPECT_FALSE(t->connected());
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "a", "1"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Writes("m1:6379").empty());
}

TEST_F(SentinelTransportFakeTest, SubscriptionsMoveToTheNewMaster) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  ASSERT_THAT(ConnectNow(*t), IsOk());
  std::vector<std::string> got;
  int ready = 0;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = t->Subscribe(
      "dlock:{r}:released",
      [&](absl::string_view, absl::string_view m) { got.emplace_back(m); },
      [&](absl::Status s) {
        EXPECT_THAT(s, IsOk());
        ++ready;
      });
  ASSERT_THAT(sub, IsOk());
  loop_.RunUntilIdle();
  nodes_["s1:26379"].names = "m2:6379";
  Announce("mymaster a 1 b 2");
  loop_.RunUntilIdle();
  EXPECT_EQ(ready, 1);  // once
  EXPECT_THAT(nodes_["m2:6379"].subscribed, ElementsAre("dlock:{r}:released"));
  EXPECT_TRUE(nodes_["m1:6379"].listeners.empty());
  ASSERT_EQ(nodes_["m2:6379"].listeners.size(), 1u);
  (*nodes_["m2:6379"].listeners[0])("dlock:{r}:released", "x");
  EXPECT_THAT(got, ElementsAre("x"));
  sub->reset();
  EXPECT_TRUE(nodes_["m2:6379"].listeners.empty());
}

TEST_F(SentinelTransportFakeTest, CloseCancelsEverythingAndRejectsLaterCalls) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  std::optional<absl::Status> connected;
  ASSERT_THAT(t->Connect([&](absl::Status s) { connected = s; }), IsOk());
  t->Close();
  ASSERT_TRUE(connected.has_value());
  EXPECT_THAT(*connected, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(t->Send({"PING"}, absl::Seconds(1), [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kCancelled));
  loop_.RunUntilIdle();
}

TEST_F(SentinelTransportFakeTest, BadOptionsAreRejected) {
  SentinelTransportOptions o;
  o.master_name = "m";
  auto factory = [](const std::string&, int, bool)
      -> absl::StatusOr<std::unique_ptr<Transport>> { return nullptr; };
  EXPECT_THAT(SentinelTransport::Create(&loop_, o, factory),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o.sentinels = {{"s", 26379}};
  o.master_name = "";
  EXPECT_THAT(SentinelTransport::Create(&loop_, o, factory),
              StatusIs(absl::StatusCode::kInvalidArgument));
}


TEST_F(SentinelTransportFakeTest, CommandsSentBeforeDiscoveryWaitForTheMasterInOrder) {
  nodes_["s1:26379"].names = "m1:6379";
  auto t = Make();
  std::vector<std::string> order;
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_THAT(t->Send({"SET", key, "1"}, absl::Seconds(1),
                        [&order, key](absl::StatusOr<Reply> r) {
                          EXPECT_THAT(r, IsOk());
                          order.push_back(key);
                        }),
                IsOk());
  }
  EXPECT_TRUE(order.empty());
  loop_.RunUntilIdle();
  EXPECT_THAT(order, ElementsAre("a", "b", "c"));
  EXPECT_THAT(Writes("m1:6379"), ElementsAre("a", "b", "c"));
}

TEST_F(SentinelTransportFakeTest, WaitingCommandTimesOutWhenDiscoveryHangs) {
  nodes_["s1:26379"].names = "m1:6379";
  nodes_["s1:26379"].hold = true;  // the sentinel never answers
  nodes_["s2:26379"].hold = true;
  auto t = Make();
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "a", "1"}, absl::Milliseconds(300),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(299));
  EXPECT_FALSE(r.has_value());
  loop_.AdvanceTime(absl::Milliseconds(1));
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace dlock
