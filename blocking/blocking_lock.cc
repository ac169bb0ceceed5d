#include "dlock/blocking/blocking_lock.h"

#include <atomic>
#include <functional>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "dlock/blocking/acquires_in_flight.h"
#include "dlock/blocking/held_leases.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/transport/mutex.h"

namespace dlock {

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

  // Shutdown's protocol (see "Shutdown" in blocking_lock.h): closes the
  // door; runs `loop_part` on the loop thread (here when called on it, or
  // when the loop thread refuses the post because it is stopping); then,
  // unless on the loop thread, waits for `loop_part`, every call inside and
  // every release sent at shutdown.
  void Shutdown(LoopThread* thread, const std::function<void()>& loop_part)
      ABSL_LOCKS_EXCLUDED(mu) {
    {
      MutexLock l(&mu);
      // Done: touch nothing else (the thread may be gone by now).
      if (done) return;
    }
    const bool on_loop = thread->InLoopThread();
    if (!Close(on_loop)) return;
    if (on_loop || !thread->Post([loop_part] { loop_part(); })) loop_part();
    Finish(on_loop);
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
    if (!owner->shut_down_) owner->held_->Forget(state.get());
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
      gate_(std::make_shared<BlockingLockGate>()),
      acquires_(std::make_unique<AcquiresInFlight>()),
      held_(std::make_unique<HeldLeases>(thread->loop(), lock, options.auto_renew,
                                         std::move(options.renewal))) {}

BlockingLock::~BlockingLock() {
  Shutdown();
  // If Shutdown could not reach the loop thread (it is stopping and runs
  // nothing more of ours), the watchdog goes here: nothing can race with it.
  held_.reset();
}

void BlockingLock::Shutdown() {
  gate_->Shutdown(thread_, [this] { ShutdownOnLoop(); });
}

void BlockingLock::ShutdownOnLoop() {
  shut_down_ = true;
  // Every Acquire in flight: its callback is destroyed without running,
  // which completes the waiting call with kCancelled; the wrapped lock gives
  // back whatever the attempt took.
  acquires_->CancelAll();
  // Every lease a guard still holds: stop renewing it and release it.
  // Only on the loop thread (the wrapped lock lives there); otherwise (the
  // loop is stopping) the keys expire by their TTL. Shutdown waits for the
  // releases through the gate.
  std::shared_ptr<BlockingLockGate> gate = gate_;
  held_->ReleaseAll(
      thread_->InLoopThread(), [gate] { gate->ReleaseBegun(); },
      [gate] { gate->ReleaseEnded(); });
  gate->LoopDone();
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
  absl::StatusOr<std::vector<LockGuard>> guards = AcquireGuards(
      std::move(options), [this, resource = std::string(resource)](
                              const AcquireOptions& o, MultiLeaseCallback callback) {
        return lock_->Acquire(
            resource, o,
            [callback = std::move(callback)](absl::StatusOr<Lease> lease) mutable {
              if (!lease.ok()) return std::move(callback)(lease.status());
              std::vector<Lease> one;
              one.push_back(*std::move(lease));
              std::move(callback)(std::move(one));
            });
      });
  if (!guards.ok()) return guards.status();
  return std::move(guards->front());
}

absl::StatusOr<std::vector<LockGuard>> BlockingLock::AcquireAll(
    std::vector<std::string> resources, AcquireOptions options) {
  return AcquireGuards(std::move(options),
                       [this, resources = std::move(resources)](
                           const AcquireOptions& o, MultiLeaseCallback callback) mutable {
                         // MultiLock keeps no state of its own: its operation
                         // outlives it.
                         MultiLock multi(thread_->loop(), lock_);
                         return multi.Acquire(std::move(resources), o, std::move(callback));
                       });
}

absl::StatusOr<std::vector<LockGuard>> BlockingLock::AcquireGuards(AcquireOptions options,
                                                                   StartAcquire start) {
  GateCall entered(gate_.get());
  if (!entered) return ShuttingDown();
  if (options.task_id.empty()) options.task_id = CurrentThreadTaskId();
  using States = std::vector<std::shared_ptr<GuardState>>;
  using Result = absl::StatusOr<States>;
  Result result = PostAndWait<Result>(
      thread_, [this, start = std::move(start),
                options = std::move(options)](Completion<Result> done) mutable {
        if (shut_down_) {
          done(ShuttingDown());
          return;
        }
        // Keeps the call open if the lock rejects the request (and
        // destroys the callback inside Acquire).
        Completion<Result> mine = done.Share();
        absl::Status begun = acquires_->Begin(
            [&](MultiLeaseCallback callback) { return start(options, std::move(callback)); },
            [this, done = std::move(done)](absl::StatusOr<std::vector<Lease>> leases) mutable {
              if (!leases.ok()) {
                done(leases.status());
                return;
              }
              if (shut_down_) {
                // Not reachable (Shutdown cancels every acquire in flight);
                // should it be, give the leases back.
                for (const Lease& l : *leases) (void)lock_->Release(l, [](absl::Status) {});
                done(ShuttingDown());
                return;
              }
              States states;
              for (Lease& l : *leases) states.push_back(held_->Adopt(std::move(l)));
              done(std::move(states));
            });
        if (!begun.ok()) mine(begun);
        // Else `mine` goes without a result: the callback gives it, or (its
        // destruction without running: cancelled, loop torn down) kCancelled.
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
    absl::Status s = held_->Release(state.get(), [](absl::Status) {});
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
        Completion<absl::Status> mine = done.Share();
        absl::Status s = held_->Release(state.get(), std::move(done));
        if (!s.ok()) mine(s);
      });
}

}  // namespace dlock
