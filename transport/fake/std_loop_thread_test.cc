#include "dlock/transport/fake/std_loop_thread.h"

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

// Runs `fn` on the loop thread and waits for it.
template <typename Fn>
void OnLoop(StdLoopThread& thread, Fn fn) {
  std::promise<void> done;
  ASSERT_TRUE(thread.Post([&] {
    fn();
    done.set_value();
  }));
  done.get_future().wait();
}

TEST(StdLoopThreadTest, PostedFunctionsRunOnTheLoopThreadInOrder) {
  StdLoopThread thread;
  EXPECT_FALSE(thread.InLoopThread());
  std::vector<int> order;
  bool on_loop = true;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(thread.Post([&, i] {
      on_loop = on_loop && thread.InLoopThread();
      order.push_back(i);
    }));
  }
  OnLoop(thread, [] {});
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(on_loop);
}

TEST(StdLoopThreadTest, TimersRunByDeadlineThenByCreationAndNeverInsideRunAfter) {
  StdLoopThread thread;
  std::vector<int> order;
  std::promise<void> last;
  absl::Time added;
  OnLoop(thread, [&] {
    EventLoop* loop = thread.loop();
    added = loop->Now();
    loop->RunAfter(absl::Milliseconds(30), [&] {
      EXPECT_GE(thread.loop()->Now() - added, absl::Milliseconds(30));
      order.push_back(3);
      last.set_value();
    });
    loop->RunAfter(absl::Milliseconds(10), [&] { order.push_back(1); });
    loop->RunAfter(absl::ZeroDuration(), [&] { order.push_back(0); });
    loop->RunAfter(absl::Milliseconds(-5), [&] { order.push_back(0); });
    loop->RunAfter(absl::Milliseconds(10), [&] { order.push_back(2); });
    EXPECT_TRUE(order.empty()) << "a timer ran inside RunAfter";
  });
  last.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{0, 0, 1, 2, 3}));
}

TEST(StdLoopThreadTest, ACancelledTimerNeverRunsAndIsDestroyedAtOnce) {
  StdLoopThread thread;
  auto token = std::make_shared<int>(0);
  bool ran = false;
  std::promise<void> after;
  OnLoop(thread, [&] {
    EventLoop* loop = thread.loop();
    TimerId id = loop->RunAfter(absl::Milliseconds(5), [&ran, token] { ran = true; });
    EXPECT_TRUE(loop->Cancel(id));
    EXPECT_EQ(token.use_count(), 1) << "the callback outlived Cancel";
    EXPECT_FALSE(loop->Cancel(id));
    EXPECT_FALSE(loop->Cancel(0));
    loop->RunAfter(absl::Milliseconds(10), [&] { after.set_value(); });
  });
  after.get_future().wait();
  EXPECT_FALSE(ran);
}

TEST(StdLoopThreadTest, ATimerCancelledByAnEarlierOneOfTheSameTurnDoesNotRun) {
  StdLoopThread thread;
  bool second_ran = false;
  std::promise<void> done;
  OnLoop(thread, [&] {
    EventLoop* loop = thread.loop();
    auto second = std::make_shared<TimerId>(0);
    loop->RunAfter(absl::ZeroDuration(), [loop, second] { EXPECT_TRUE(loop->Cancel(*second)); });
    *second = loop->RunAfter(absl::ZeroDuration(), [&] { second_ran = true; });
    loop->RunAfter(absl::Milliseconds(5), [&] { done.set_value(); });
  });
  done.get_future().wait();
  EXPECT_FALSE(second_ran);
}

TEST(StdLoopThreadTest, TheDestructorRunsWhatWasPostedAndDropsPendingTimers) {
  int ran = 0;
  auto token = std::make_shared<int>(0);
  bool timer_ran = false;
  {
    StdLoopThread thread;
    OnLoop(thread, [&] {
      thread.loop()->RunAfter(absl::Hours(1), [&timer_ran, token] { timer_ran = true; });
    });
    // Keeps the loop thread busy until the destructor has begun (a post is
    // refused), so the 50 functions below are still queued then.
    ASSERT_TRUE(thread.Post([&thread] {
      while (thread.Post([] {})) std::this_thread::yield();
    }));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(thread.Post([&ran] { ++ran; }));
  }
  EXPECT_EQ(ran, 50);
  EXPECT_FALSE(timer_ran);
  EXPECT_EQ(token.use_count(), 1) << "the dropped timer's callback was not destroyed";
}

TEST(StdLoopThreadTest, PostIsRefusedOnceTheDestructorBegan) {
  bool refused = false;
  {
    StdLoopThread thread;
    // Runs on the loop thread and posts until a post is refused, which
    // happens once the destructor (which the test thread enters right
    // after this Post) has begun; the destructor still runs this function
    // and what it posted before, then joins.
    ASSERT_TRUE(thread.Post([&] {
      while (thread.Post([] {})) std::this_thread::yield();
      refused = true;
    }));
  }
  EXPECT_TRUE(refused);
}

TEST(StdLoopThreadTest, NowNeverGoesBackwards) {
  StdLoopThread thread;
  OnLoop(thread, [&] {
    absl::Time prev = thread.loop()->Now();
    for (int i = 0; i < 1000; ++i) {
      absl::Time now = thread.loop()->Now();
      EXPECT_GE(now, prev);
      prev = now;
    }
  });
}

}  // namespace
}  // namespace dlock
