// This header defines `PostAndWait`, the one way the blocking layer calls
// into a `LoopThread` from another thread and waits for the answer.
//
//   absl::Status s = PostAndWait<absl::Status>(
//       thread, [&](Completion<absl::Status> done) {      // on the loop thread
//         absl::Status sent = lock->Release(lease, std::move(done));
//         // On rejection the callback (and the Completion in it) was
//         // destroyed without running: give the outcome directly.
//         if (!sent.ok()) { /* see below */ }
//       });
//
// `fn` runs on the loop thread with a `Completion<T>`. Whoever holds it --
// `fn` itself, a callback it hands to an async API, several callbacks
// sharing it through `Completion::Share()` -- completes it once with the
// result; the first result given wins. The caller's thread returns once
// every Completion of the call is gone (completed or destroyed), so nothing
// on the loop thread touches the call after `PostAndWait` returned. When
// the last one goes without a result (the loop thread refused the post
// because it is stopping, or an async API destroyed its callback without
// running it, e.g. on teardown), the result is kCancelled.
//
// An async API that REJECTS a request destroys the callback (and the
// Completion in it) inside the call. To still report the rejection, keep a
// second handle first: `Completion<T> mine = done.Share();` ... hand `done`
// to the API ... `if (!sent.ok()) mine(sent);`. Completions made with Share
// are one call's handles: the call returns when all are gone, with the
// first result any of them gave.
//
// When the loop thread has caller turns (UvLoopThread; see
// dlock/transport/loop_thread.h), `fn` and the loop run on the calling
// thread until the call is answered; otherwise `fn` is posted and the
// caller sleeps.
//
// Called on the loop thread itself, `PostAndWait` cannot wait for its own
// thread: it returns kFailedPrecondition without running `fn`.
//
// Results are copied (payloads included) so that they share no refcounted
// state with the loop thread (absl::Status shares its rep between copies;
// Debian's absl is not built with TSan, so a rep freed on one thread after the other dropped its
// copy shows up as a false race).
//
// Thread-safe. std::mutex (not absl::Mutex): TSan-clean with Debian's
// uninstrumented absl.
#ifndef DLOCK_BLOCKING_POST_AND_WAIT_H_
#define DLOCK_BLOCKING_POST_AND_WAIT_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/loop_thread.h"

namespace dlock {
namespace blocking_internal {

inline absl::Status Detached(const absl::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(status.code(), status.message());
  // Payloads too (e.g. the fenced stores' highest fence), each a fresh copy.
  status.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, absl::Cord(std::string(payload)));
  });
  return out;
}
template <typename U>
absl::StatusOr<U> Detached(absl::StatusOr<U> value) {
  if (value.ok()) return value;
  return Detached(value.status());
}

// One waiting call, on the caller's stack.
template <typename T>
class PendingCall {
 public:
  explicit PendingCall(LoopThread* thread) : thread_(thread) {}
  void AddRef() {
    std::lock_guard<std::mutex> l(mu_);
    ++refs_;
  }
  void CompleteAndDrop(std::optional<T> value) {
    if (value.has_value()) value = Detached(*std::move(value));
    LoopThread* const thread = thread_;  // `this` may be gone once unlocked
    {
      std::lock_guard<std::mutex> l(mu_);
      if (value.has_value() && !result_.has_value()) result_ = std::move(value);
      if (--refs_ != 0) return;
      cv_.notify_all();
    }
    // A caller turn (LoopThread::RunOnCaller) sleeping on the loop thread's
    // own lock checks Finished() again.
    thread->NotifyDone();
  }
  bool Finished() {
    std::lock_guard<std::mutex> l(mu_);
    return refs_ == 0;
  }
  // Once Finished().
  T Take() {
    std::lock_guard<std::mutex> l(mu_);
    if (!result_.has_value()) return absl::CancelledError("the loop thread is stopping");
    return std::move(*result_);
  }
  T Wait() {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return refs_ == 0; });
    }
    return Take();
  }

 private:
  LoopThread* const thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int refs_ = 0;
  std::optional<T> result_;
};

}  // namespace blocking_internal

// A handle on one PostAndWait call, held on the loop thread. Move-only;
// callable once (later calls do nothing). Destroyed without being called:
// gives no result (see the header comment).
template <typename T>
class Completion {
 public:
  Completion(Completion&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  Completion& operator=(Completion&& other) noexcept {
    if (this != &other) {
      Drop();
      call_ = std::exchange(other.call_, nullptr);
    }
    return *this;
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() { Drop(); }

  // Gives the result (the first one given to the call wins) and lets go.
  void operator()(T value) {
    if (call_ != nullptr) std::exchange(call_, nullptr)->CompleteAndDrop(std::move(value));
  }

  // Another handle on the same call.
  Completion Share() const { return Completion(call_); }

  // Still holds the call (not yet called or moved from).
  bool pending() const { return call_ != nullptr; }

 private:
  template <typename U, typename Fn>
  friend U PostAndWait(LoopThread* thread, Fn fn);

  explicit Completion(blocking_internal::PendingCall<T>* call) : call_(call) {
    if (call_ != nullptr) call_->AddRef();
  }
  void Drop() {
    if (call_ != nullptr) std::exchange(call_, nullptr)->CompleteAndDrop(std::nullopt);
  }

  blocking_internal::PendingCall<T>* call_ = nullptr;
};

// Runs `fn(Completion<T>)` on `thread`'s loop thread and waits for the
// result (see the header comment). T is absl::Status or absl::StatusOr<U>.
template <typename T, typename Fn>
T PostAndWait(LoopThread* thread, Fn fn) {
  if (thread->InLoopThread()) {
    return absl::FailedPreconditionError(
        "blocking dlock call on the loop thread would deadlock");
  }
  blocking_internal::PendingCall<T> call(thread);
  absl::AnyInvocable<void() &&> task = [done = Completion<T>(&call),
                                        fn = std::move(fn)]() mutable {
    fn(std::move(done));
  };
  // A caller turn: this thread runs the loop itself until the call is
  // answered (no hand-off, no wake-up of another thread).
  if (thread->RunOnCaller(task, [&call] { return call.Finished(); })) return call.Take();
  // No caller turns (or stopping): the loop thread runs it. A refused Post
  // destroys the function and the Completion in it.
  thread->Post(std::move(task));
  return call.Wait();
}

}  // namespace dlock

#endif  // DLOCK_BLOCKING_POST_AND_WAIT_H_
