#include "dlock/transport/uv/deferred_queue.h"

#include <memory>
#include <string>
#include <vector>

#include "dlock/transport/fake/manual_event_loop.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using Queue = DeferredQueue<std::string>;

TEST(DeferredQueueTest, PushDeliversOnALaterTurnNotInsidePush) {
  ManualEventLoop loop;
  std::vector<std::string> seen;
  Queue queue(&loop, [&](std::string&& e) { seen.push_back(e); });
  queue.Push("a");
  queue.Push("b");
  EXPECT_TRUE(seen.empty());
  loop.RunUntilIdle();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(loop.pending(), 0u);
}

TEST(DeferredQueueTest, WhatADeliveryQueuesWaitsForTheNextTurn) {
  ManualEventLoop loop;
  std::vector<std::string> seen;
  bool queued_during_probe = false;
  std::unique_ptr<Queue> queue;
  queue = std::make_unique<Queue>(&loop, [&](std::string&& e) {
    seen.push_back(e);
    if (e != "a") return;
    // Runs after this drain and before the next one.
    loop.RunAfter(absl::ZeroDuration(), [&] { queued_during_probe = !queue->empty(); });
    queue->Push("b");
  });
  queue->Push("a");
  loop.RunUntilIdle();
  EXPECT_TRUE(queued_during_probe);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

TEST(DeferredQueueTest, DestroyingTheQueueInsideADeliveryStopsTheDrain) {
  ManualEventLoop loop;
  std::vector<std::string> seen;
  std::unique_ptr<Queue> queue;
  queue = std::make_unique<Queue>(&loop, [&](std::string&& e) {
    seen.push_back(e);
    queue.reset();
  });
  queue->Push("a");
  queue->Push("b");
  loop.RunUntilIdle();
  EXPECT_EQ(seen, (std::vector<std::string>{"a"}));
  EXPECT_EQ(loop.pending(), 0u);
}

TEST(DeferredQueueTest, StoppedQueueKeepsEventsForPopFront) {
  ManualEventLoop loop;
  std::vector<std::string> seen;
  Queue queue(&loop, [&](std::string&& e) { seen.push_back(e); });
  queue.Push("a");
  queue.Stop();
  queue.Push("b");
  loop.RunUntilIdle();
  EXPECT_TRUE(seen.empty());
  std::string e;
  ASSERT_TRUE(queue.PopFront(&e));
  EXPECT_EQ(e, "a");
  ASSERT_TRUE(queue.PopFront(&e));
  EXPECT_EQ(e, "b");
  EXPECT_FALSE(queue.PopFront(&e));
}

TEST(DeferredQueueTest, TakeAllCancelsThePendingDrain) {
  ManualEventLoop loop;
  std::vector<std::string> seen;
  Queue queue(&loop, [&](std::string&& e) { seen.push_back(e); });
  queue.Push("a");
  std::deque<std::string> all = queue.TakeAll();
  EXPECT_EQ(all.size(), 1u);
  EXPECT_EQ(loop.pending(), 0u);
  loop.RunUntilIdle();
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace dlock
