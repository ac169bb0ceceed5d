#include "dlock/lock/blocking_lock.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/mutex.h"

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
// dlock::Mutex (std::mutex, annotated; see dlock/transport/mutex.h).
template <typename T>
class Call {
 public:
  void AddRef() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock l(&mu_);
    ++refs_;
  }

  // Sets the result unless already set (first completion wins), and drops
  // the holder's reference. The holder must not touch the call afterwards.
  void CompleteAndDrop(std::optional<T> value) ABSL_LOCKS_EXCLUDED(mu_) {
    if (value.has_value()) value = Detached(*std::move(value));
    MutexLock l(&mu_);
    if (value.has_value() && !result_.has_value()) result_ = std::move(value);
    --refs_;
    cv_.SignalAll();
  }

  T Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock l(&mu_);
    while (!(result_.has_value() && refs_ == 0)) cv_.Wait(&mu_);
    return std::move(*result_);
  }

  // Loop thread only: the wrapped lock accepted the request, so from now on
  // only its callback (or that callback's destruction) completes the call.
  bool accepted = false;

 private:
  Mutex mu_;
  CondVar cv_;
  int refs_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<T> result_ ABSL_GUARDED_BY(mu_);
};

absl::Status LoopStopped() {
  return absl::CancelledError("the loop thread is stopping");
}

absl::Status ShuttingDown() {
  return absl::CancelledError(
      "the blocking lock is shutting down (its client is being destroyed)");
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

// dlock::Mutex (std::mutex, annotated; see dlock/transport/mutex.h).
struct BlockingLockGate {
  Mutex mu;
  CondVar cv;
  // Shutdown() began: no call enters any more.
  bool closed ABSL_GUARDED_BY(mu) = false;
  bool loop_done ABSL_GUARDED_BY(mu) = false;  // ShutdownOnLoop() ran
  bool done ABSL_GUARDED_BY(mu) = false;       // Shutdown() finished
  int active ABSL_GUARDED_BY(mu) = 0;          // calls inside
  // Releases sent by ShutdownOnLoop, unanswered.
  int releasing ABSL_GUARDED_BY(mu) = 0;

  bool Enter() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    if (closed) return false;
    ++active;
    return true;
  }
  void Leave() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    --active;
    cv.SignalAll();
  }
};

namespace {

// One call through the gate: entered (counted until destroyed) or refused.
class GateCall {
 public:
  explicit GateCall(BlockingLockGate* gate)
      : gate_(gate != nullptr && gate->Enter() ? gate : nullptr) {}
  ~GateCall() {
    if (gate_ != nullptr) gate_->Leave();
  }
  GateCall(const GateCall&) = delete;
  GateCall& operator=(const GateCall&) = delete;
  explicit operator bool() const { return gate_ != nullptr; }

 private:
  BlockingLockGate* gate_;
};

}  // namespace

std::string CurrentThreadTaskId() {
  static std::atomic<uint64_t> next{1};
  thread_local const std::string id = absl::StrCat("thread-", next.fetch_add(1));
  return id;
}

// ---- LockGuard ---------------------------------------------------------

LockGuard::LockGuard(LockGuard&& other) noexcept
    : owner_(other.owner_), gate_(std::move(other.gate_)), state_(std::move(other.state_)) {
  other.owner_ = nullptr;
}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    if (owns_lock()) (void)Unlock();
    owner_ = other.owner_;
    gate_ = std::move(other.gate_);
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
  std::shared_ptr<BlockingLockGate> gate = std::move(gate_);
  BlockingLock* owner = owner_;
  owner_ = nullptr;
  GateCall entered(gate.get());
  // The BlockingLock shut down (and released the lease), or is gone.
  if (!entered) return ShuttingDown();
  return owner->ReleaseState(std::move(state));
}

Lease LockGuard::Release() {
  std::shared_ptr<GuardState> state = std::move(state_);
  std::shared_ptr<BlockingLockGate> gate = std::move(gate_);
  BlockingLock* owner = owner_;
  owner_ = nullptr;
  if (state == nullptr) return Lease();
  GateCall entered(gate.get());
  // Shut down: renewal already stopped (and the lease released).
  if (!entered) return state->lease;
  // On the loop thread: stop any renewal hook and forget the lease (the
  // caller owns it now; Shutdown() must not release it).
  auto detach = [owner, &state] {
    if (owner->shut_down_) return;
    owner->held_.erase(state.get());
    if (state->before_release) std::move(state->before_release)();
  };
  if (owner->thread()->InLoopThread()) {
    detach();
  } else {
    (void)RunBlocking<absl::Status>(owner->thread(), [&detach](Call<absl::Status>* call) {
      detach();
      CallRef<absl::Status>(call, /*callback=*/false).Complete(absl::OkStatus());
    });
  }
  return state->lease;
}

// ---- BlockingLock ------------------------------------------------------

BlockingLock::BlockingLock(LoopThread* thread, dlock::Lock* lock)
    : thread_(thread), lock_(lock), gate_(std::make_shared<BlockingLockGate>()) {}

BlockingLock::~BlockingLock() { Shutdown(); }

void BlockingLock::Shutdown() {
  BlockingLockGate& g = *gate_;
  {
    MutexLock l(&g.mu);
    // Done: touch nothing else (the thread may be gone by now).
    if (g.done) return;
  }
  const bool on_loop = thread_->InLoopThread();
  {
    MutexLock l(&g.mu);
    if (g.closed) {
      if (!on_loop) {
        while (!g.done) g.cv.Wait(&g.mu);
      }
      return;
    }
    g.closed = true;
  }
  if (on_loop) {
    // Cannot wait for our own thread: do the loop-side part and return.
    ShutdownOnLoop();
    MutexLock l(&g.mu);
    g.done = true;
    g.cv.SignalAll();
    return;
  }
  if (!thread_->Post([this] { ShutdownOnLoop(); })) {
    // The loop thread is stopping and runs nothing more of ours.
    ShutdownOnLoop();
  }
  MutexLock l(&g.mu);
  while (!(g.loop_done && g.active == 0 && g.releasing == 0)) g.cv.Wait(&g.mu);
  g.done = true;
  g.cv.SignalAll();
}

void BlockingLock::ShutdownOnLoop() {
  shut_down_ = true;
  // Every Acquire in flight: its callback is destroyed without running,
  // which completes the waiting call with kCancelled; the wrapped lock gives
  // back whatever the attempt took.
  std::unordered_map<const void*, AcquireHandle> acquiring = std::move(acquiring_);
  acquiring_.clear();
  for (auto& [call, handle] : acquiring) handle.Cancel();
  // Every lease a guard still holds: stop renewing it and release it.
  // Only on the loop thread (the wrapped lock lives there); otherwise (the
  // loop is stopping) the keys expire by their TTL.
  const bool can_send = thread_->InLoopThread();
  // (Including those whose guard's Unlock was refused by the closed gate:
  // held_ keeps them alive for this.)
  std::unordered_map<const GuardState*, std::shared_ptr<GuardState>> held = std::move(held_);
  held_.clear();
  std::shared_ptr<BlockingLockGate> gate = gate_;
  for (auto& [raw, state] : held) {
    state->released_at_shutdown.store(true, std::memory_order_release);
    state->lost.store(true, std::memory_order_release);
    if (state->before_release) std::move(state->before_release)();
    if (!can_send) continue;
    {
      MutexLock l(&gate->mu);
      ++gate->releasing;
    }
    absl::Status s = lock_->Release(state->lease, [gate](absl::Status) {
      MutexLock l(&gate->mu);
      --gate->releasing;
      gate->cv.SignalAll();
    });
    if (!s.ok()) {
      MutexLock l(&gate->mu);
      --gate->releasing;
    }
  }
  OnShutdown();
  MutexLock l(&gate->mu);
  gate->loop_done = true;
  gate->cv.SignalAll();
}

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
  GateCall entered(gate_.get());
  if (!entered) return ShuttingDown();
  if (options.task_id.empty()) options.task_id = CurrentThreadTaskId();
  using Result = absl::StatusOr<std::shared_ptr<GuardState>>;
  Result result = RunBlocking<Result>(
      thread_, [this, resource = std::string(resource),
                options = std::move(options)](Call<Result>* call) {
        if (shut_down_) {
          CallRef<Result>(call, /*callback=*/false).Complete(ShuttingDown());
          return;
        }
        absl::StatusOr<AcquireHandle> handle = lock_->Acquire(
            resource, options,
            [this, call, done = CallRef<Result>(call, /*callback=*/true)](
                absl::StatusOr<Lease> lease) mutable {
              acquiring_.erase(call);
              if (!lease.ok()) {
                done.Complete(lease.status());
                return;
              }
              if (shut_down_) {
                // Not reachable (Shutdown cancels every acquire in flight);
                // should it be, give the lease back.
                (void)lock_->Release(*lease, [](absl::Status) {});
                done.Complete(ShuttingDown());
                return;
              }
              auto state = std::make_shared<GuardState>();
              state->lease = *std::move(lease);
              OnAcquired(state);
              held_[state.get()] = state;
              done.Complete(std::move(state));
            });
        if (!handle.ok()) {
          CallRef<Result>(call, /*callback=*/false).Complete(handle.status());
          return;
        }
        call->accepted = true;
        acquiring_[call] = *handle;
      });
  if (!result.ok()) return result.status();
  // Shutdown released it before we got here.
  if ((*result)->released_at_shutdown.load(std::memory_order_acquire)) return ShuttingDown();
  return LockGuard(this, gate_, *std::move(result));
}

absl::StatusOr<Lease> BlockingLock::Extend(const LockGuard& guard, absl::Duration ttl) {
  if (!guard.owns_lock()) {
    return absl::FailedPreconditionError("the guard owns no lock");
  }
  GateCall entered(gate_.get());
  if (!entered) return ShuttingDown();
  using Result = absl::StatusOr<Lease>;
  return RunBlocking<Result>(
      thread_, [this, lease = guard.lease(), ttl](Call<Result>* call) {
        if (shut_down_) {
          CallRef<Result>(call, /*callback=*/false).Complete(ShuttingDown());
          return;
        }
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
  // Called with the gate entered.
  if (thread_->InLoopThread()) {
    // Cannot wait for our own loop: send the release and report that its
    // outcome is unknown to us.
    if (shut_down_) return ShuttingDown();  // released by Shutdown
    held_.erase(state.get());
    if (state->before_release) std::move(state->before_release)();
    absl::Status s = lock_->Release(state->lease, [](absl::Status) {});
    if (!s.ok()) return s;
    return absl::FailedPreconditionError(
        "released from the loop thread: sent without waiting for the outcome");
  }
  return RunBlocking<absl::Status>(
      thread_, [this, state = std::move(state)](Call<absl::Status>* call) {
        if (shut_down_) {
          // Shutdown released it already.
          CallRef<absl::Status>(call, /*callback=*/false).Complete(ShuttingDown());
          return;
        }
        held_.erase(state.get());
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
