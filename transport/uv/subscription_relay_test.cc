#include "dlock/transport/uv/subscription_relay.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace {

// A node that records its subscriptions; the test plays the server.
class StubNode : public Transport {
 public:
  struct Sub {
    std::string channel;
    MessageCallback on_message;
    absl::AnyInvocable<void(absl::Status) &&> on_ready;
    bool live = true;
  };
  absl::Status Send(std::vector<std::string>, absl::Duration, ReplyCallback) override {
    return absl::UnimplementedError("no commands");
  }
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override {
    if (refuse) return absl::UnavailableError("refused");
    subs.push_back(std::make_shared<Sub>(
        Sub{std::move(channel), std::move(on_message), std::move(on_ready)}));
    class Handle : public Subscription {
     public:
      explicit Handle(std::shared_ptr<Sub> s) : s_(std::move(s)) {}
      ~Handle() override { s_->live = false; }

     private:
      std::shared_ptr<Sub> s_;
    };
    return std::unique_ptr<Subscription>(new Handle(subs.back()));
  }
  bool refuse = false;
  std::vector<std::shared_ptr<Sub>> subs;
};

TEST(SubscriptionRelayTest, MovingToAnotherNodeDropsTheOldPlacementAndReadyRunsOnce) {
  SubscriptionRelay relay;
  StubNode a, b;
  std::vector<std::string> got;
  std::vector<absl::Status> ready;
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle = relay.Add(
      "ch", [&](absl::string_view, absl::string_view m) { got.emplace_back(m); },
      [&](absl::Status s) { ready.push_back(s); }, &id);
  ASSERT_TRUE(relay.Place(id, &a, "a:1").ok());
  EXPECT_TRUE(relay.Hosts("a:1"));
  ASSERT_TRUE(relay.Place(id, &b, "b:1").ok());
  EXPECT_FALSE(a.subs[0]->live);
  EXPECT_FALSE(relay.Hosts("a:1"));
  std::move(b.subs[0]->on_ready)(absl::OkStatus());
  relay.Ready(id, absl::CancelledError("late"));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].ok());
  b.subs[0]->on_message("ch", "m1");
  EXPECT_EQ(got, std::vector<std::string>{"m1"});
}

TEST(SubscriptionRelayTest, AMessageCallbackMayDestroyItsOwnHandle) {
  SubscriptionRelay relay;
  StubNode node;
  std::unique_ptr<Subscription> handle;
  int calls = 0;
  uint64_t id = 0;
  handle = relay.Add(
      "ch",
      [&](absl::string_view, absl::string_view) {
        handle.reset();
        ++calls;
      },
      nullptr, &id);
  ASSERT_TRUE(relay.Place(id, &node, "n:1").ok());
  node.subs[0]->on_message("ch", "m");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(node.subs[0]->live);
  EXPECT_EQ(relay.Find(id), nullptr);
}

TEST(SubscriptionRelayTest, AFailedPlacementLeavesTheRecordUnplacedAndWaiting) {
  SubscriptionRelay relay;
  StubNode node;
  node.refuse = true;
  uint64_t id = 0;
  auto handle = relay.Add(
      "ch", [](absl::string_view, absl::string_view) {}, [](absl::Status) {}, &id);
  EXPECT_EQ(relay.Place(id, &node, "n:1").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(relay.Place(id, nullptr, "m:1").code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(relay.Hosts("m:1"));
  EXPECT_EQ(relay.UnplacedWaiting(), std::vector<uint64_t>{id});
  EXPECT_EQ(relay.DetachAllAndTakeReady().size(), 1u);
  EXPECT_TRUE(relay.UnplacedWaiting().empty());
}

TEST(SubscriptionRelayTest, AHandleOutlivingTheRelayDoesNothing) {
  auto relay = std::make_unique<SubscriptionRelay>();
  uint64_t id = 0;
  auto handle = relay->Add(
      "ch", [](absl::string_view, absl::string_view) {}, nullptr, &id);
  relay.reset();
  handle.reset();  // must not touch the destroyed relay (ASan would say)
}

}  // namespace
}  // namespace dlock
