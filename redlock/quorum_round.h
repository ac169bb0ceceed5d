// Internal to //redlock (namespace redlock_internal): `QuorumRound`, one
// fan-out of a command to every server and the votes that come back, shared
// by acquire (voting, fence write-back, final release), extend and release;
// and `QuorumOp`, the base of an operation that runs such rounds and owes
// its caller exactly one callback.
//
// A round keeps its per-server state inline (no allocation up to
// kInlineServers servers): each server's vote and a value (acquire: the
// fence it returned). Every round has a generation; replies and timers
// capture it and are ignored once the round is no longer current
// (`IsCurrent`), so a straggler of an earlier round never counts in a later
// one. One deadline timer per round (`ArmDeadline`) bounds it.
#ifndef DLOCK_REDLOCK_QUORUM_ROUND_H_
#define DLOCK_REDLOCK_QUORUM_ROUND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/redlock/core.h"
#include "dlock/transport/event_loop.h"

namespace dlock {
namespace redlock_internal {

// One server's answer in a round. What kYes and kNo mean is the round's:
// acquire granted / held by another owner; extend extended / refused;
// release deleted / did not hold the token; fence write-back confirmed.
enum class Vote : uint8_t {
  kPending,    // not answered yet
  kYes,
  kNo,
  kFailed,     // error reply, transport failure, or the send was refused
  kTimedOut,   // no answer within the round's deadline (a kind of failure)
  kUncounted,  // answered yes, but the vote does not count (restart rules)
  kOut,        // not part of this round
};

struct Tally {
  int yes = 0;
  int no = 0;
  int failed = 0;     // kFailed and kTimedOut
  int timed_out = 0;  // kTimedOut only
  int uncounted = 0;
  int pending = 0;
  int servers = 0;    // every server, kOut included
};

class QuorumRound {
 public:
  static constexpr size_t kInlineServers = 7;

  // Starts a new round over `n` servers, all kPending, sent at `sent_at`;
  // the previous round's timer is cancelled. Returns the new generation.
  uint32_t Begin(EventLoop* loop, size_t n, absl::Time sent_at);
  // Ends the round: cancels its timer; IsCurrent() is false from now on.
  void Close(EventLoop* loop);
  bool IsCurrent(uint32_t generation) const { return open_ && generation == generation_; }
  bool open() const { return open_; }
  uint32_t generation() const { return generation_; }
  absl::Time sent_at() const { return sent_at_; }
  size_t size() const { return slots_.size(); }

  void Set(size_t i, Vote vote) { slots_[i].vote = vote; }
  Vote vote(size_t i) const { return slots_[i].vote; }
  void set_value(size_t i, int64_t value) { slots_[i].value = value; }
  int64_t value(size_t i) const { return slots_[i].value; }

  // Records server i's answer to a compare-token command (extend, release):
  // OK -> `yes` (kYes, or kUncounted for a vote the restart rules do not
  // count), kFailedPrecondition (the token did not own the key) -> kNo,
  // anything else -> Fail(i, status).
  void Record(size_t i, const absl::Status& status, Vote yes = Vote::kYes);
  // Records a failure of server i (kFailed, or kTimedOut when `status` is
  // kDeadlineExceeded and `timeouts` is set) and remembers it as the last
  // server error.
  void Fail(size_t i, const absl::Status& status, bool timeouts = false);
  void NoteError(const absl::Status& status) { last_error_ = status; }
  // "; last error: ..." or "" when there was none.
  std::string LastErrorSuffix() const;

  // Every server still pending counts as timed out.
  void ExpirePending();
  Tally Count() const;

  // Runs `on_deadline` after `delay` unless the round is closed or a new one
  // began first.
  void ArmDeadline(EventLoop* loop, absl::Duration delay,
                   absl::AnyInvocable<void() &&> on_deadline);
  // The deadline fired (its callback is running): no timer to cancel.
  void DeadlineFired() { timer_ = 0; }

 private:
  struct Slot {
    Vote vote = Vote::kPending;
    int64_t value = 0;
  };

  absl::InlinedVector<Slot, kInlineServers> slots_;
  uint32_t generation_ = 0;
  bool open_ = false;
  absl::Time sent_at_;
  absl::Status last_error_;
  TimerId timer_ = 0;
};

// What every RedLock operation shares whatever its result: the core, the
// round, ending (EndRound) and the round's timers. Compiled once (QuorumOp
// is a template per result type).
class QuorumOpBase : public Op {
 protected:
  explicit QuorumOpBase(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  EventLoop* loop() const { return core_->loop(); }
  bool done() const { return done_; }

  // The observer event for the outcome (OnAcquire, OnExtend, OnRelease).
  virtual void Report(const absl::Status& status) = 0;

  // No more rounds: the round closed, done, unregistered from the core.
  void EndRound();

  // Runs `method` on a later loop turn if the op is still alive and the
  // round `generation` still current.
  template <typename Self>
  void PostInRound(uint32_t generation, void (Self::*method)()) {
    PostInRoundOf(generation, static_cast<Method>(method));
  }

  // Arms the current round's deadline: `method` runs at its end if the
  // round is still current then.
  template <typename Self>
  void ArmRoundDeadline(absl::Duration delay, void (Self::*method)()) {
    ArmRoundDeadlineOf(delay, static_cast<Method>(method));
  }

  const std::shared_ptr<Core> core_;
  QuorumRound round_;

 private:
  using Method = void (QuorumOpBase::*)();
  void PostInRoundOf(uint32_t generation, Method method);
  void ArmRoundDeadlineOf(absl::Duration delay, Method method);

  bool done_ = false;
};

// The base of an operation that owes its caller one callback taking
// `Result` (absl::StatusOr<Lease> or absl::Status).
template <typename Result>
class QuorumOp : public QuorumOpBase {
 public:
  using Callback = absl::AnyInvocable<void(Result) &&>;

  QuorumOp(std::shared_ptr<Core> core, Callback callback)
      : QuorumOpBase(std::move(core)), callback_(std::move(callback)) {}

 protected:
  // Ends the operation: no more rounds, reported, callback run now. The
  // callback may destroy the RedLock; `self` keeps this op alive.
  void Complete(Result result) {
    std::shared_ptr<Op> self = shared_from_this();
    Callback callback = End();
    Report(StatusOf(result));
    std::move(callback)(std::move(result));
  }

  // Ends the operation, reported now, its callback posted to a later loop
  // turn (outcomes known inside the call, and Shutdown).
  void CompleteLater(const absl::Status& status) {
    std::shared_ptr<Op> self = shared_from_this();
    Callback callback = End();
    Report(status);
    loop()->RunAfter(absl::ZeroDuration(),
                     [callback = std::move(callback), status]() mutable {
                       std::move(callback)(status);
                     });
  }

  // Completes with `status` on a later loop turn, reported then, unless
  // the operation ended first.
  void PostComplete(absl::Status status) {
    std::weak_ptr<Op> weak = weak_from_this();
    loop()->RunAfter(absl::ZeroDuration(), [weak, status] {
      std::shared_ptr<Op> op = weak.lock();
      auto* self = static_cast<QuorumOp*>(op.get());
      if (self != nullptr && !self->done()) self->Complete(status);
    });
  }

  // Ends the operation without running its callback (Cancel): the
  // callback is destroyed before this returns.
  void Drop(const absl::Status& status) {
    std::shared_ptr<Op> self = shared_from_this();
    { Callback callback = End(); }
    Report(status);
  }

 private:
  static absl::Status StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static absl::Status StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }

  Callback End() {
    EndRound();
    Callback callback = std::move(callback_);
    callback_ = nullptr;
    return callback;
  }

  Callback callback_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_QUORUM_ROUND_H_
