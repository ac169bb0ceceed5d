#include "dlock/transport/uv/uv_loop_thread.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

constexpr auto kWait = std::chrono::seconds(10);

TEST(UvLoopThreadTest, PostedFunctionsRunOnTheLoopThreadInOrder) {
  UvLoopThread thread;
  EXPECT_FALSE(thread.InLoopThread());
  std::vector<int> order;  // touched only on the loop thread until `done`
  std::promise<void> done;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(thread.Post([&, i] {
      EXPECT_TRUE(thread.InLoopThread());
      order.push_back(i);
      if (i == 999) done.set_value();
    }));
  }
  ASSERT_EQ(done.get_future().wait_for(kWait), std::future_status::ready);
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
}

TEST(UvLoopThreadTest, EachPostingThreadKeepsItsOrder) {
  UvLoopThread thread;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::vector<std::vector<int>> seen(kThreads);  // loop thread only
  std::atomic<int> total{0};
  std::promise<void> done;
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        thread.Post([&, t, i] {
          seen[t].push_back(i);
          if (++total == kThreads * kPerThread) done.set_value();
        });
      }
    });
  }
  for (auto& p : posters) p.join();
  ASSERT_EQ(done.get_future().wait_for(kWait), std::future_status::ready);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) EXPECT_EQ(seen[t][i], i);
  }
}

TEST(UvLoopThreadTest, TimersOfItsLoopRunOnTheLoopThread) {
  UvLoopThread thread;
  std::promise<absl::Duration> elapsed;
  thread.Post([&] {
    const absl::Time start = thread.loop()->Now();
    thread.loop()->RunAfter(absl::Milliseconds(10), [&, start] {
      EXPECT_TRUE(thread.InLoopThread());
      elapsed.set_value(thread.loop()->Now() - start);
    });
  });
  auto f = elapsed.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_GE(f.get(), absl::Milliseconds(10));
}

TEST(UvLoopThreadTest, PostFromTheLoopThreadRunsLater) {
  UvLoopThread thread;
  std::promise<std::vector<int>> result;
  thread.Post([&] {
    auto order = std::make_shared<std::vector<int>>();
    thread.Post([&, order] {
      order->push_back(2);
      result.set_value(*order);
    });
    order->push_back(1);
  });
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_THAT(f.get(), ::testing::ElementsAre(1, 2));
}

TEST(UvLoopThreadTest, DestructorRunsWhatWasPostedAndDropsPendingTimers) {
  std::atomic<int> ran{0};
  std::atomic<bool> timer_ran{false};
  {
    UvLoopThread thread;
    thread.Post([&] {
      thread.loop()->RunAfter(absl::Hours(1), [&] { timer_ran = true; });
    });
    for (int i = 0; i < 100; ++i) thread.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
  EXPECT_FALSE(timer_ran.load());
}

TEST(UvLoopThreadTest, PostFailsOnceStoppingAndDestroysTheFunction) {
  auto thread = std::make_unique<UvLoopThread>();
  UvLoopThread* raw = thread.get();
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> weak = token;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> in_first{false};
  std::atomic<bool> posted_during_stop{true};
  // The first function holds the loop thread until the destructor has begun.
  raw->Post([&, released] {
    in_first = true;
    released.wait();
    posted_during_stop = raw->Post([token = std::move(token)] {
      ADD_FAILURE() << "ran after stop";
    });
  });
  while (!in_first) std::this_thread::yield();
  std::thread destroyer([&] { thread.reset(); });
  // The destructor is blocked joining the loop thread; once it has set the
  // stop flag, Post fails.
  while (raw->Post([] {})) std::this_thread::yield();
  release.set_value();
  destroyer.join();
  EXPECT_FALSE(posted_during_stop.load());
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace dlock

namespace dlock {
namespace {

// A caller turn waiting for `n` chained zero-delay timers.
bool RunChain(UvLoopThread& thread, int n, bool* ran_on_caller) {
  std::atomic<bool> finished{false};
  const std::thread::id me = std::this_thread::get_id();
  struct Step {
    static void Go(UvLoopThread* t, int left, std::atomic<bool>* f) {
      if (left == 0) {
        f->store(true);
        t->NotifyDone();
        return;
      }
      t->loop()->RunAfter(absl::ZeroDuration(), [t, left, f] { Go(t, left - 1, f); });
    }
  };
  absl::AnyInvocable<void() &&> fn = [&] {
    *ran_on_caller = std::this_thread::get_id() == me && thread.InLoopThread();
    Step::Go(&thread, n, &finished);
  };
  return thread.RunOnCaller(fn, [&] { return finished.load(); });
}

TEST(UvLoopThreadCallerTurnTest, ACallerRunsTheLoopOnItsOwnThreadUntilDone) {
  UvLoopThread thread;
  for (int i = 0; i < 100; ++i) {
    bool on_caller = false;
    ASSERT_TRUE(RunChain(thread, 5, &on_caller));
    EXPECT_TRUE(on_caller);
    EXPECT_FALSE(thread.InLoopThread());
  }
}

TEST(UvLoopThreadCallerTurnTest, CallersOnSeveralThreadsEachFinish) {
  UvLoopThread thread;
  std::atomic<int> finished{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        bool on_caller = false;
        if (!RunChain(thread, 3, &on_caller)) refused.fetch_add(1);
        finished.fetch_add(1);
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(finished.load(), 1200);
  EXPECT_EQ(refused.load(), 0);
}

// Timers a caller set run on time although no caller is inside a call any
// more (the watchdog's renewals while the user holds a guard): the
// background thread runs them.
TEST(UvLoopThreadCallerTurnTest, TimersRunWhileNoCallerIsInside) {
  UvLoopThread thread;
  std::promise<std::thread::id> ran;
  std::atomic<bool> set{false};
  absl::AnyInvocable<void() &&> fn = [&] {
    thread.loop()->RunAfter(absl::Milliseconds(50),
                            [&] { ran.set_value(std::this_thread::get_id()); });
    set = true;
    thread.NotifyDone();
  };
  ASSERT_TRUE(thread.RunOnCaller(fn, [&] { return set.load(); }));
  std::future<std::thread::id> f = ran.get_future();
  // This thread waits here, outside any call.
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
}

// A posted function runs while a caller waits in its turn (on that caller).
TEST(UvLoopThreadCallerTurnTest, PostsRunWhileACallerRunsTheLoop) {
  UvLoopThread thread;
  std::atomic<bool> posted_ran{false};
  std::thread poster;
  absl::AnyInvocable<void() &&> fn = [&] {
    poster = std::thread([&] {
      ASSERT_TRUE(thread.Post([&] {
        posted_ran = true;
        thread.NotifyDone();
      }));
    });
  };
  ASSERT_TRUE(thread.RunOnCaller(fn, [&] { return posted_ran.load(); }));
  poster.join();
  EXPECT_TRUE(posted_ran.load());
}

// Destroyed while a caller waits for a timer: the timer is dropped (its
// callback destroyed), which answers the caller; the destructor returns.
TEST(UvLoopThreadCallerTurnTest, DestructorEndsACallerWaitingForADroppedTimer) {
  auto thread = std::make_unique<UvLoopThread>();
  std::atomic<bool> dropped{false};
  std::promise<void> waiting;
  struct OnDrop {
    UvLoopThread* t;
    std::atomic<bool>* dropped;
    OnDrop(UvLoopThread* t, std::atomic<bool>* d) : t(t), dropped(d) {}
    OnDrop(OnDrop&& o) noexcept : t(o.t), dropped(std::exchange(o.dropped, nullptr)) {}
    ~OnDrop() {
      if (dropped != nullptr) {
        *dropped = true;
        t->NotifyDone();
      }
    }
  };
  bool accepted = false;
  std::thread caller([&] {
    UvLoopThread* t = thread.get();
    absl::AnyInvocable<void() &&> fn = [&, t] {
      t->loop()->RunAfter(absl::Hours(1), [d = OnDrop(t, &dropped)] {});
      waiting.set_value();
    };
    accepted = t->RunOnCaller(fn, [&] { return dropped.load(); });
  });
  ASSERT_EQ(waiting.get_future().wait_for(kWait), std::future_status::ready);
  thread.reset();
  caller.join();
  EXPECT_TRUE(accepted);
  EXPECT_TRUE(dropped.load());
}

}  // namespace
}  // namespace dlock
