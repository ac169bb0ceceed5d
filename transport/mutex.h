// This header defines `Mutex`, `MutexLock` and `CondVar`: std::mutex and
// std::condition_variable with Clang thread-safety annotations, so members
// marked ABSL_GUARDED_BY(mu_) are checked at compile time
// (`bazel build --config=thread_safety //...`, clang -Wthread-safety).
//
// Why not absl::Mutex: Debian's libabsl is not instrumented for TSan, which
// then reports false races; dlock's blocking paths must be TSan-clean, so
// they use std::mutex. Why a wrapper: libstdc++'s std::mutex carries no
// capability attribute, so the analysis cannot see it.
//
// Usage:
//   dlock::Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_) = 0;
//   void Add() ABSL_LOCKS_EXCLUDED(mu_) { dlock::MutexLock l(&mu_); ++n_; }
//   void WaitPositive() {
//     dlock::MutexLock l(&mu_);
//     while (n_ <= 0) cv_.Wait(&mu_);
//   }
//
// Mutex and CondVar are thread-safe; MutexLock is a scoped guard for one
// thread.
#ifndef DLOCK_TRANSPORT_MUTEX_H_
#define DLOCK_TRANSPORT_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace dlock {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `*mu` from construction to destruction.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `*mu`, blocks until woken, and holds `*mu` again on return.
  // Wake-ups may be spurious: wait in a loop on the condition.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held; the caller's guard unlocks it
  }

  // As Wait, but returns by `deadline` at the latest.
  void WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    (void)cv_.wait_until(lock, deadline);
    lock.release();
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_MUTEX_H_
