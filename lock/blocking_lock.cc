#include "dlock/lock/blocking_lock.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

// A copy of `status` that shares nothing with the original. absl::Status
// shares a refcounted rep between copies; Debian's libabsl is not built
// with TSan, so a rep whose last reference is dropped on the loop thread
// after the caller thread dropped its own shows up as a (false) race. Each
// result that crosses to the caller gets a rep of its own.
absl::Status Detached(const absl::Status& status) {
  return status.ok() ? absl::OkStatus() : absl::Status(status.code(), status.message());
}
template <typename U>
absl::StatusOr<U> Detached(absl::StatusOr<U> value) {
  if (value.ok()) return value;
  return Detached(value.status());
}

// One blocking call: the loop thread completes it, the caller waits.
//
// The Call lives on the caller's stack. Loop-side holders (the posted
// function, the callback handed to the wrapped lock) count themselves in
// `refs_` under the mutex, and the caller returns only once the result is
// there AND no holder remains, so the caller is always the one that frees it
// and nothing on the loop thread touches it afterwards.
//
// std::mutex (not absl::Mutex): TSan-clean with Debian's uninstrumented absl.
template <typename T>
class Call {
 public:
  void AddRef() {
    std::lock_guard<std::mutex> l(mu_);
    ++refs_;
  }

  // Sets the result unless already set (first completion wins), and drops
  // the holder's reference. The holder must not touch the call afterwards.
  void CompleteAndDrop(std::optional<T> value) {
    if (value.has_value()) value = Detached(*std::move(value));
    std::lock_guard<std::mutex> l(mu_);
    if (value.has_value() && !result_.has_value()) result_ = std::move(value);
    --refs_;
    cv_.notify_all();
  }

  T Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return result_.has_value() && refs_ == 0; });
    return std::move(*result_);
  }

  // Loop thread only: the wrapped lock accepted the request, so from now on
  // only its callback (or that callback's destruction) completes the call.
  bool accepted = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int refs_ = 0;
  std::optional<T> result_;
};

absl::Status LoopStopped() {
  return absl::CancelledError("the loop thread is stopping");
}

// A counted reference to a Call held on the loop side. Destroyed while
// still holding: completes the call with kCancelled (if `cancel_on_drop()`
// says so) and drops the reference.
template <typename T>
class CallRef {
 public:
  explicit CallRef(Call<T>* call, bool callback) : call_(call), callback_(callback) {
    call_->AddRef();
  }
  CallRef(CallRef&& other) noexcept
      : call_(std::exchange(other.call_, nullptr)), callback_(other.callback_) {}
  CallRef& operator=(CallRef&&) = delete;
  ~CallRef() {
    if (call_ == nullptr) return;
    // A posted function destroyed without running (Post refused, loop torn
    // down), or an accepted request's callback destroyed without running:
    // the loop is going away. A callback destroyed inside a call that
    // rejected the request (not accepted) leaves the result to the caller.
    const bool cancel = !callback_ || call_->accepted;
    call_->CompleteAndDrop(cancel ? std::optional<T>(LoopStopped()) : std::nullopt);
  }

  Call<T>* get() const { return call_; }

  // Completes with `value` and lets go.
  void Complete(T value) {
    std::exchange(call_, nullptr)->CompleteAndDrop(std::move(value));
  }
  // Lets go without completing (someone else will, or already did).
  void Drop() { std::exchange(call_, nullptr)->CompleteAndDrop(std::nullopt); }

 private:
  Call<T>* call_;
  bool callback_;
};

// Runs `fn(call)` on the loop thread and waits for the call to complete.
// `fn` must complete the call itself, or hand a CallRef to someone who will.
template <typename T, typename Fn>
T RunBlocking(LoopThread* thread, Fn fn) {
  if (thread->InLoopThread()) {
    return absl::FailedPreconditionError(
        "blocking dlock call on the loop thread would deadlock");
  }
  Call<T> call;
  // A refused Post destroys the function: its CallRef completes the call.
  thread->Post([ref = CallRef<T>(&call, /*callback=*/false), fn = std::move(fn)]() mutable {
    fn(ref.get());
    ref.Drop();
  });
  return call.Wait();
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
      (void)RunBlocking<absl::Status>(owner->thread(), [&state](Call<absl::Status>* call) {
        if (state->before_release) std::move(state->before_release)();
        CallRef<absl::Status>(call, /*callback=*/false).Complete(absl::OkStatus());
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
                options = std::move(options)](Call<Result>* call) {
        absl::StatusOr<AcquireHandle> handle = lock_->Acquire(
            resource, options,
            [this, done = CallRef<Result>(call, /*callback=*/true)](
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
          CallRef<Result>(call, /*callback=*/false).Complete(handle.status());
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
      thread_, [this, lease = guard.lease(), ttl](Call<Result>* call) {
        absl::Status s = lock_->Extend(
            lease, ttl,
            [done = CallRef<Result>(call, /*callback=*/true)](absl::StatusOr<Lease> r) mutable {
              done.Complete(std::move(r));
            });
        if (!s.ok()) {
          CallRef<Result>(call, /*callback=*/false).Complete(s);
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
      thread_, [this, state = std::move(state)](Call<absl::Status>* call) {
        if (state->before_release) std::move(state->before_release)();
        absl::Status s = lock_->Release(
            state->lease, [done = CallRef<absl::Status>(call, /*callback=*/true)](
                              absl::Status status) mutable {
              done.Complete(std::move(status));
            });
        if (!s.ok()) {
          CallRef<absl::Status>(call, /*callback=*/false).Complete(s);
          return;
        }
        call->accepted = true;
      });
}

}  // namespace dlock
