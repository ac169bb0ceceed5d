#include "dlock/lock/blocking_lock.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

// One blocking call: the loop thread completes it, the caller waits.
// std::mutex (not absl::Mutex): TSan-clean with Debian's uninstrumented absl.
template <typename T>
class Call {
 public:
  // First completion wins; later ones are ignored.
  void Complete(T value) {
    std::lock_guard<std::mutex> l(mu_);
    if (result_.has_value()) return;
    result_.emplace(std::move(value));
    cv_.notify_all();
  }

  T Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return result_.has_value(); });
    return std::move(*result_);
  }

  // Loop thread only: the wrapped lock accepted the request, so from now on
  // only its callback (or its destruction) completes the call.
  bool accepted = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> result_;
};

absl::Status LoopStopped() {
  return absl::CancelledError("the loop thread is stopping");
}

// Owned by a posted function: completes the call with kCancelled if the
// function is destroyed without having run (Post refused it, or the loop
// was torn down). Disarm() when it runs.
template <typename T>
class PostedGuard {
 public:
  explicit PostedGuard(std::shared_ptr<Call<T>> call) : call_(std::move(call)) {}
  PostedGuard(PostedGuard&& other) noexcept : call_(std::move(other.call_)) {}
  PostedGuard& operator=(PostedGuard&&) = delete;
  ~PostedGuard() {
    if (call_ != nullptr) call_->Complete(LoopStopped());
  }
  std::shared_ptr<Call<T>> Disarm() { return std::move(call_); }

 private:
  std::shared_ptr<Call<T>> call_;
};

// Owned by a callback handed to the wrapped lock: runs -> Complete(value);
// destroyed without running after the request was accepted (loop torn
// down) -> kCancelled. Destroyed inside a rejecting call (not accepted) ->
// nothing: the caller completes with the rejection.
template <typename T>
class CallbackGuard {
 public:
  explicit CallbackGuard(std::shared_ptr<Call<T>> call) : call_(std::move(call)) {}
  CallbackGuard(CallbackGuard&& other) noexcept : call_(std::move(other.call_)) {}
  CallbackGuard& operator=(CallbackGuard&&) = delete;
  ~CallbackGuard() {
    if (call_ != nullptr && call_->accepted) call_->Complete(LoopStopped());
  }
  void Complete(T value) {
    std::shared_ptr<Call<T>> call = std::move(call_);
    call->Complete(std::move(value));
  }

 private:
  std::shared_ptr<Call<T>> call_;
};

// Runs `fn(call)` on the loop thread and waits for the call to complete.
template <typename T, typename Fn>
T RunBlocking(LoopThread* thread, Fn fn) {
  if (thread->InLoopThread()) {
    return absl::FailedPreconditionError(
        "blocking dlock call on the loop thread would deadlock");
  }
  auto call = std::make_shared<Call<T>>();
  thread->Post([guard = PostedGuard<T>(call), fn = std::move(fn)]() mutable {
    fn(guard.Disarm());
  });
  // A refused Post destroyed the function: the guard completed the call.
  return call->Wait();
}

}  // namespace

std::string CurrentThreadTaskId() {
  static std::atomic<uint64_t> next{1};
  thread_local const std::string id = absl::StrCat("thread-", next.fetch_add(1));
  return id;
}

// ---- LockGuard ---------------------------------------------------------

LockGuard::LockGuard(LockGuard&& other) noexcept
    : owner_(other.owner_), state_(std::move(other.state_)) {
  other.owner_ = nullptr;
}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    if (owns_lock()) (void)Unlock();
    owner_ = other.owner_;
    state_ = std::move(other.state_);
    other.owner_ = nullptr;
  }
  return *this;
}

LockGuard::~LockGuard() {
  if (owns_lock()) (void)Unlock();
}

bool LockGuard::IsValid() const {
  return state_ != nullptr && !state_->lost.load(std::memory_order_acquire);
}

absl::Status LockGuard::Unlock() {
  if (!owns_lock()) {
    return absl::FailedPreconditionError("the guard owns no lock");
  }
  std::shared_ptr<GuardState> state = std::move(state_);
  BlockingLock* owner = owner_;
  owner_ = nullptr;
  return owner->ReleaseState(std::move(state));
}

Lease LockGuard::Release() {
  std::shared_ptr<GuardState> state = std::move(state_);
  BlockingLock* owner = owner_;
  owner_ = nullptr;
  if (state == nullptr) return Lease();
  if (state->before_release) {
    // Stop any renewal hook on the loop thread; the caller owns the lease.
    if (owner->thread()->InLoopThread()) {
      std::move(state->before_release)();
    } else {
      (void)RunBlocking<absl::Status>(
          owner->thread(), [state](std::shared_ptr<Call<absl::Status>> call) {
            if (state->before_release) std::move(state->before_release)();
            call->Complete(absl::OkStatus());
          });
    }
  }
  return state->lease;
}

// ---- BlockingLock ------------------------------------------------------

BlockingLock::BlockingLock(LoopThread* thread, dlock::Lock* lock)
    : thread_(thread), lock_(lock) {}

absl::StatusOr<LockGuard> BlockingLock::TryLock(absl::string_view resource,
                                                absl::Duration ttl) {
  AcquireOptions options;
  options.ttl = ttl;
  options.wait = absl::ZeroDuration();
  return Acquire(resource, std::move(options));
}

absl::StatusOr<LockGuard> BlockingLock::Lock(absl::string_view resource,
                                             absl::Duration ttl,
                                             absl::Duration wait_timeout) {
  AcquireOptions options;
  options.ttl = ttl;
  options.wait = wait_timeout;
  return Acquire(resource, std::move(options));
}

absl::StatusOr<LockGuard> BlockingLock::Acquire(absl::string_view resource,
                                                AcquireOptions options) {
  if (options.task_id.empty()) options.task_id = CurrentThreadTaskId();
  using Result = absl::StatusOr<std::shared_ptr<GuardState>>;
  Result result = RunBlocking<Result>(
      thread_, [this, resource = std::string(resource),
                options = std::move(options)](std::shared_ptr<Call<Result>> call) {
        absl::StatusOr<AcquireHandle> handle = lock_->Acquire(
            resource, options,
            [this, done = CallbackGuard<Result>(call)](
                absl::StatusOr<Lease> lease) mutable {
              if (!lease.ok()) {
                done.Complete(lease.status());
                return;
              }
              auto state = std::make_shared<GuardState>();
              state->lease = *std::move(lease);
              OnAcquired(state);
              done.Complete(std::move(state));
            });
        if (!handle.ok()) {
          call->Complete(handle.status());
          return;
        }
        call->accepted = true;
      });
  if (!result.ok()) return result.status();
  return LockGuard(this, *std::move(result));
}

absl::StatusOr<Lease> BlockingLock::Extend(const LockGuard& guard, absl::Duration ttl) {
  if (!guard.owns_lock()) {
    return absl::FailedPreconditionError("the guard owns no lock");
  }
  using Result = absl::StatusOr<Lease>;
  return RunBlocking<Result>(
      thread_, [this, lease = guard.lease(), ttl](std::shared_ptr<Call<Result>> call) {
        absl::Status s = lock_->Extend(
            lease, ttl,
            [done = CallbackGuard<Result>(call)](absl::StatusOr<Lease> r) mutable {
              done.Complete(std::move(r));
            });
        if (!s.ok()) {
          call->Complete(s);
          return;
        }
        call->accepted = true;
      });
}

absl::Status BlockingLock::ReleaseState(std::shared_ptr<GuardState> state) {
  if (thread_->InLoopThread()) {
    // Cannot wait for our own loop: send the release and report that its
    // outcome is unknown to us.
    if (state->before_release) std::move(state->before_release)();
    absl::Status s = lock_->Release(state->lease, [](absl::Status) {});
    if (!s.ok()) return s;
    return absl::FailedPreconditionError(
        "released from the loop thread: sent without waiting for the outcome");
  }
  return RunBlocking<absl::Status>(
      thread_, [this, state = std::move(state)](std::shared_ptr<Call<absl::Status>> call) {
        if (state->before_release) std::move(state->before_release)();
        absl::Status s = lock_->Release(
            state->lease, [done = CallbackGuard<absl::Status>(call)](
                              absl::Status status) mutable {
              done.Complete(std::move(status));
            });
        if (!s.ok()) {
          call->Complete(s);
          return;
        }
        call->accepted = true;
      });
}

}  // namespace dlock
