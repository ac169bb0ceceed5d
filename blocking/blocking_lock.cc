#include "dlock/blocking/blocking_lock.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/transport/mutex.h"

namespace dlock {

// What a guard shares with the loop thread. `lease` is immutable once the
// guard exists; `lost` and `released_at_shutdown` may be read from any
// thread; `watch` is touched only on the loop thread.
struct GuardState {
  Lease lease;
  // Set when the lease is known lost (renewal failed, or Shutdown released
  // it).
  std::atomic<bool> lost{false};
  // Set when Shutdown() released this lease (then `lost` is set too).
  std::atomic<bool> released_at_shutdown{false};
  // Loop thread only: the renewal (auto_renew), stopped before the release
  // is sent and on detach. A stopped handle's destructor touches nothing
  // shared, so the state may be freed on any thread afterwards.
  std::optional<WatchHandle> watch;

  void StopRenewal() {
    if (watch.has_value()) watch->Stop();
  }
};

namespace {

absl::Status ShuttingDown() {
  return absl::CancelledError(
      "the blocking lock is shutting down (its client is being destroyed)");
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

  // Shutdown's steps. Close() returns false when Shutdown already ran or
  // is running elsewhere (it then waits for that one to finish, unless
  // `on_loop`: the loop thread cannot wait for itself).
  bool Close(bool on_loop) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    if (done) return false;
    if (closed) {
      if (!on_loop) {
        while (!done) cv.Wait(&mu);
      }
      return false;
    }
    closed = true;
    return true;
  }
  // Waits (unless `on_loop`) until the loop-side part ran, every call
  // inside left and every release sent at shutdown was answered; then
  // Shutdown is done.
  void Finish(bool on_loop) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    if (!on_loop) {
      while (!(loop_done && active == 0 && releasing == 0)) cv.Wait(&mu);
    }
    done = true;
    cv.SignalAll();
  }
  void LoopDone() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    loop_done = true;
    cv.SignalAll();
  }
  // A release sent at shutdown: begun, then answered (or refused).
  void ReleaseBegun() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    ++releasing;
  }
  void ReleaseEnded() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock l(&mu);
    --releasing;
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

const Lease& LockGuard::lease() const { return state_->lease; }

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
  // On the loop thread: stop renewing and forget the lease (the caller owns
  // it now; Shutdown() must not release it).
  auto detach = [owner, &state] {
    if (owner->shut_down_) return;
    owner->held_.erase(state.get());
    state->StopRenewal();
  };
  if (owner->thread()->InLoopThread()) {
    detach();
  } else {
    (void)PostAndWait<absl::Status>(owner->thread(),
                                    [&detach](Completion<absl::Status> done) {
                                      detach();
                                      done(absl::OkStatus());
                                    });
  }
  return state->lease;
}

// ---- BlockingLock ------------------------------------------------------

BlockingLock::BlockingLock(LoopThread* thread, dlock::Lock* lock, BlockingLockOptions options)
    : thread_(thread),
      lock_(lock),
      options_(std::move(options)),
      gate_(std::make_shared<BlockingLockGate>()) {}

BlockingLock::~BlockingLock() {
  Shutdown();
  // Shutdown could not reach the loop thread (it is stopping and runs
  // nothing more of ours): nothing can race with this.
  watchdog_.reset();
}

void BlockingLock::Shutdown() {
  BlockingLockGate& g = *gate_;
  {
    MutexLock l(&g.mu);
    // Done: touch nothing else (the thread may be gone by now).
    if (g.done) return;
  }
  const bool on_loop = thread_->InLoopThread();
  if (!g.Close(on_loop)) return;
  if (on_loop) {
    // Cannot wait for our own thread: do the loop-side part and return.
    ShutdownOnLoop();
  } else if (!thread_->Post([this] { ShutdownOnLoop(); })) {
    // The loop thread is stopping and runs nothing more of ours.
    ShutdownOnLoop();
  }
  g.Finish(on_loop);
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
    state->StopRenewal();
    if (!can_send) continue;
    gate->ReleaseBegun();
    absl::Status s =
        lock_->Release(state->lease, [gate](absl::Status) { gate->ReleaseEnded(); });
    if (!s.ok()) gate->ReleaseEnded();
  }
  // Every watch is stopped: the watchdog goes (only when on the loop
  // thread; otherwise the destructor frees it once nothing runs).
  if (can_send) watchdog_.reset();
  gate->LoopDone();
}

void BlockingLock::StartRenewal(const std::shared_ptr<GuardState>& state) {
  if (watchdog_ == nullptr) {
    watchdog_ = std::make_unique<Watchdog>(thread_->loop(), lock_, options_.renewal.watchdog);
  }
  WatchOptions watch;
  watch.renew_interval = options_.renewal.renew_interval;
  watch.retry_interval = options_.renewal.retry_interval;
  // Weak: the state owns the watch handle, which owns this callback.
  std::weak_ptr<GuardState> weak = state;
  watch.on_lost = [this, weak](absl::Status why) {
    std::shared_ptr<GuardState> s = weak.lock();
    if (s == nullptr) return;
    s->lost.store(true, std::memory_order_release);
    if (options_.renewal.on_lost) options_.renewal.on_lost(s->lease, why);
  };
  absl::StatusOr<WatchHandle> handle = watchdog_->Watch(state->lease, std::move(watch));
  if (!handle.ok()) {
    // Expired before it reached us (or unusable): hand it out invalid.
    state->lost.store(true, std::memory_order_release);
    return;
  }
  state->watch = *std::move(handle);
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
  Result result = PostAndWait<Result>(
      thread_, [this, resource = std::string(resource),
                options = std::move(options)](Completion<Result> done) {
        if (shut_down_) {
          done(ShuttingDown());
          return;
        }
        // Keeps the call open if the lock rejects the request (and
        // destroys the callback inside Acquire).
        Completion<Result> mine = done.Share();
        // A unique key for acquiring_ while the request is in flight.
        auto key = std::make_shared<char>();
        absl::StatusOr<AcquireHandle> handle = lock_->Acquire(
            resource, options,
            [this, key, done = std::move(done)](absl::StatusOr<Lease> lease) mutable {
              acquiring_.erase(key.get());
              if (!lease.ok()) {
                done(lease.status());
                return;
              }
              if (shut_down_) {
                // Not reachable (Shutdown cancels every acquire in flight);
                // should it be, give the lease back.
                (void)lock_->Release(*lease, [](absl::Status) {});
                done(ShuttingDown());
                return;
              }
              done(AdoptOnLoop(*std::move(lease)));
            });
        if (!handle.ok()) {
          mine(handle.status());
          return;
        }
        acquiring_[key.get()] = *handle;
        // `mine` goes without a result: the callback gives it, or (its
        // destruction without running: cancelled, loop torn down) kCancelled.
      });
  if (!result.ok()) return result.status();
  // Shutdown released it before we got here.
  if ((*result)->released_at_shutdown.load(std::memory_order_acquire)) return ShuttingDown();
  return LockGuard(this, gate_, *std::move(result));
}

std::shared_ptr<GuardState> BlockingLock::AdoptOnLoop(Lease lease) {
  auto state = std::make_shared<GuardState>();
  state->lease = std::move(lease);
  if (options_.auto_renew) StartRenewal(state);
  held_[state.get()] = state;
  return state;
}

absl::StatusOr<std::vector<LockGuard>> BlockingLock::AcquireAll(
    std::vector<std::string> resources, AcquireOptions options) {
  GateCall entered(gate_.get());
  if (!entered) return ShuttingDown();
  if (options.task_id.empty()) options.task_id = CurrentThreadTaskId();
  using States = std::vector<std::shared_ptr<GuardState>>;
  using Result = absl::StatusOr<States>;
  Result result = PostAndWait<Result>(
      thread_, [this, resources = std::move(resources),
                options = std::move(options)](Completion<Result> done) mutable {
        if (shut_down_) {
          done(ShuttingDown());
          return;
        }
        Completion<Result> mine = done.Share();
        auto key = std::make_shared<char>();
        // MultiLock keeps no state of its own: its operation outlives it.
        MultiLock multi(thread_->loop(), lock_);
        absl::StatusOr<AcquireHandle> handle = multi.Acquire(
            std::move(resources), options,
            [this, key, done = std::move(done)](
                absl::StatusOr<std::vector<Lease>> leases) mutable {
              acquiring_.erase(key.get());
              if (!leases.ok()) {
                done(leases.status());
                return;
              }
              if (shut_down_) {
                for (const Lease& l : *leases) (void)lock_->Release(l, [](absl::Status) {});
                done(ShuttingDown());
                return;
              }
              States states;
              for (Lease& l : *leases) states.push_back(AdoptOnLoop(std::move(l)));
              done(std::move(states));
            });
        if (!handle.ok()) {
          mine(handle.status());
          return;
        }
        acquiring_[key.get()] = *handle;
      });
  if (!result.ok()) return result.status();
  std::vector<LockGuard> guards;
  bool released = false;
  for (std::shared_ptr<GuardState>& state : *result) {
    released |= state->released_at_shutdown.load(std::memory_order_acquire);
    guards.push_back(LockGuard(this, gate_, std::move(state)));
  }
  // Shutdown released them before we got here (the guards then do nothing).
  if (released) return ShuttingDown();
  return guards;
}

absl::StatusOr<Lease> BlockingLock::Extend(const LockGuard& guard, absl::Duration ttl) {
  if (!guard.owns_lock()) {
    return absl::FailedPreconditionError("the guard owns no lock");
  }
  GateCall entered(gate_.get());
  if (!entered) return ShuttingDown();
  using Result = absl::StatusOr<Lease>;
  return PostAndWait<Result>(
      thread_, [this, lease = guard.lease(), ttl](Completion<Result> done) {
        if (shut_down_) {
          done(ShuttingDown());
          return;
        }
        Completion<Result> mine = done.Share();
        absl::Status s = lock_->Extend(
            lease, ttl, [done = std::move(done)](absl::StatusOr<Lease> r) mutable {
              done(std::move(r));
            });
        if (!s.ok()) mine(s);
      });
}

absl::Status BlockingLock::ReleaseState(std::shared_ptr<GuardState> state) {
  // Called with the gate entered.
  if (thread_->InLoopThread()) {
    // Cannot wait for our own loop: send the release and report that its
    // outcome is unknown to us.
    if (shut_down_) return ShuttingDown();  // released by Shutdown
    held_.erase(state.get());
    state->StopRenewal();
    absl::Status s = lock_->Release(state->lease, [](absl::Status) {});
    if (!s.ok()) return s;
    return absl::FailedPreconditionError(
        "released from the loop thread: sent without waiting for the outcome");
  }
  return PostAndWait<absl::Status>(
      thread_, [this, state = std::move(state)](Completion<absl::Status> done) {
        if (shut_down_) {
          // Shutdown released it already.
          done(ShuttingDown());
          return;
        }
        held_.erase(state.get());
        state->StopRenewal();
        Completion<absl::Status> mine = done.Share();
        absl::Status s = lock_->Release(state->lease, std::move(done));
        if (!s.ok()) mine(s);
      });
}

}  // namespace dlock
