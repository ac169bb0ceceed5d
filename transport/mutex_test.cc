#include "dlock/transport/mutex.h"

#include <thread>

#include "gtest/gtest.h"

namespace dlock {
namespace {

class Counter {
 public:
  void Add() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock l(&mu_);
    ++n_;
    cv_.SignalAll();
  }
  // Blocks until the count reaches `n`.
  void WaitFor(int n) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock l(&mu_);
    while (n_ < n) cv_.Wait(&mu_);
  }
  int value() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock l(&mu_);
    return n_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, ExcludesAndWakes) {
  Counter c;
  constexpr int kThreads = 4;
  constexpr int kEach = 1000;
  std::thread waiter([&] { c.WaitFor(kThreads * kEach); });
  std::thread adders[kThreads];
  for (auto& t : adders) {
    t = std::thread([&] {
      for (int i = 0; i < kEach; ++i) c.Add();
    });
  }
  for (auto& t : adders) t.join();
  waiter.join();  // hangs (test timeout) if a wake-up were lost
  EXPECT_EQ(c.value(), kThreads * kEach);
}

// Wait() gives the mutex back while blocked (else Add could never run) and
// holds it again on return (else the guard's unlock would be undefined).
TEST(MutexTest, WaitReleasesAndReacquires) {
  Counter c;
  std::thread waiter([&] { c.WaitFor(1); });
  c.Add();
  waiter.join();
  c.Add();  // the mutex is free again after the waiter's guard
  EXPECT_EQ(c.value(), 2);
}

}  // namespace
}  // namespace dlock
