// This header defines `LockObserver`, the interface dlock's lock policies,
// watchdog and RedLock report what they do to, and `TextLockObserver`, one
// implementation that turns each event into a line of text for a sink you
// provide (stderr, your logger, a test's vector).
//
// dlock forces no logging library on you: by default every component reports
// to `NoopLockObserver()`, which ignores everything. To watch, pass your own
// observer in the component's options (each takes a `LockObserver*`; nullptr
// means the no-op observer). Override only the methods you care about: every
// method has an empty default.
//
// What is reported:
//
//   event                  | reported by                | carries
//   -----------------------+----------------------------+-------------------------
//   OnAcquire              | every policy, once per     | outcome, latency, time
//                          | Acquire that calls back    | waited, attempts, fence
//   OnAcquireWait          | RetryLock, RedLock retries | attempt, delay until next
//   OnRelease              | every policy               | outcome, latency,
//                          |                            | warning (waiters not woken)
//   OnExtend               | every policy               | outcome, latency
//   OnRenewal              | Watchdog                   | outcome, latency, margin
//   OnLeaseLost            | Watchdog                   | why
//   OnServerVote           | RedLock, per server        | server, op, outcome
//   OnLateGrant            | every policy, RedLock per  | op, why it was given
//                          | server                     | back, server
//
// Durations are measured on the component's `EventLoop::Now()` clock.
//
// Events are passed by const reference; their `absl::string_view` fields
// point into the reporter's memory and are valid only during the call (copy
// them to keep them).
//
// Threading: a component calls its observer on its loop's thread, never
// from another thread, and never while holding a lock of its own. An
// observer must not block and should not throw; it may call back into dlock
// (e.g. release a lease), but such calls follow the usual async contract.
// One observer object may be shared by components on different loops only
// if it is thread-safe itself (`TextLockObserver` is as thread-safe as its
// sink).
#ifndef DLOCK_LOCK_OBSERVER_H_
#define DLOCK_LOCK_OBSERVER_H_

#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// An Acquire finished (its callback is about to run). For RetryLock this is
// the whole wait, not one attempt; the wrapped lock's own attempts are
// reported by the wrapped lock with its own `policy` name.
struct AcquireEvent {
  // "simple", "retry", "reentrant", "redlock", ...
  absl::string_view policy;
  absl::string_view resource;
  // OK, or the error the callback gets (kAborted: busy, ...).
  absl::Status status;
  // From the Acquire call to its outcome.
  absl::Duration latency;
  // Of `latency`, the time spent waiting between attempts (0 for one try).
  absl::Duration waited;
  // Number of attempts made (>= 1 unless cancelled before the first).
  int attempts = 0;
  // On success: the lease's fencing token and TTL; else 0 / zero.
  int64_t fence = 0;
  absl::Duration ttl;
};

// A retrying policy will try again. Lets a tool say what it waits for.
struct AcquireWaitEvent {
  absl::string_view policy;
  absl::string_view resource;
  // The attempt that just failed (1-based) and why (kAborted: held by
  // another owner; kUnavailable: server down, ...).
  int attempt = 0;
  absl::Status last_error;
  // How long until the next attempt at the latest (a release notification
  // may wake it earlier), and how much of the caller's wait is left.
  absl::Duration next_attempt_in;
  absl::Duration wait_left;
};

// A Release or Extend finished.
struct ReleaseEvent {
  absl::string_view policy;
  absl::string_view resource;
  absl::Status status;  // OK, kFailedPrecondition (not owner any more), ...
  absl::Duration latency;
  // Empty, or (with an OK status) what went wrong although the release
  // succeeded: e.g. the server refused the release notification's PUBLISH
  // (an ACL user without channel permission), so waiters on other
  // connections will not be woken (UnpublishedReleaseWarning).
  absl::string_view warning;
};

struct ExtendEvent {
  absl::string_view policy;
  absl::string_view resource;
  absl::Status status;
  absl::Duration latency;
  absl::Duration ttl;  // the TTL asked for
};

// The watchdog renewed a lease, or tried to.
struct RenewalEvent {
  absl::string_view resource;
  absl::Status status;
  absl::Duration latency;
  // Time left until the lease's local deadline when the renewal was sent:
  // how close the lease came to being lost. Small or shrinking margins mean
  // a stalled loop or a slow server.
  absl::Duration margin;
  // 1 for the first renewal of a watch, 2 for the next, ...
  int64_t renewal = 0;
};

// The watchdog gave up a lease: the holder is told (on_lost) at the same
// time. `status` is why: kFailedPrecondition (another owner has the key or
// it expired on the server), kDeadlineExceeded (the local deadline passed
// before a renewal succeeded: server unreachable or the loop stalled).
struct LeaseLostEvent {
  absl::string_view resource;
  absl::Status status;
  // How long the lease was held before it was lost.
  absl::Duration held_for;
};

// One RedLock server answered (or failed to) one operation.
struct ServerVoteEvent {
  absl::string_view resource;
  // "acquire", "extend" or "release" ("fence": RedLock's write-back of
  // the fencing counter, see redlock.h).
  absl::string_view operation;
  // Index into the RedLock's server list, and its name if configured
  // (e.g. "127.0.0.1:6379"), else empty.
  int server = 0;
  absl::string_view server_name;
  absl::Status status;  // OK: this server voted yes
  absl::Duration latency;
};

// A grant arrived when nobody could use it any more, and was released
// again: the lease it belongs to had been released already, or the attempt
// that asked for it had lost, been cancelled (a wait that ran out cancels its
// attempt) or run out of validity. The release is a compare-and-delete by
// that grant's own token, so it never touches another owner's key; it is
// sent when this event is reported, and its reply is reported as usual
// (RedLock: OnServerVote "release"). See docs/late-grants.md.
//
// Replies that never come (a timeout, a lost connection) are not grants and
// are not reported here: their tokens are released as unknown outcomes.
struct LateGrantEvent {
  absl::string_view policy;
  absl::string_view resource;
  // "acquire", or "extend" (RedLock's extend sets a key again on a server
  // that lost it, so a late extend can re-create a released lease's key).
  absl::string_view operation;
  // Why it was not kept: one of kLateGrantReleased, kLateGrantLost,
  // kLateGrantCancelled, kLateGrantExpired.
  absl::string_view reason;
  // RedLock: the server's index and its name if configured; single-server
  // policies: -1 and empty.
  int server = -1;
  absl::string_view server_name;
};

// The `reason`s of a LateGrantEvent.
// Its lease had been released before the grant arrived (RedLock: a straggler
// of the attempt that won, or a late extend).
inline constexpr char kLateGrantReleased[] = "released";
// Its attempt had failed (RedLock: no quorum, validity ran out, fence
// write-back failed, a later attempt was under way).
inline constexpr char kLateGrantLost[] = "lost";
// Its attempt had been given up: Cancel(), a wait that ran out, the lock
// destroyed.
inline constexpr char kLateGrantCancelled[] = "cancelled";
// It arrived at or after the lease's local deadline: no validity left.
inline constexpr char kLateGrantExpired[] = "expired";

class LockObserver {
 public:
  virtual ~LockObserver() = default;

  virtual void OnAcquire(const AcquireEvent& event) {}
  virtual void OnAcquireWait(const AcquireWaitEvent& event) {}
  virtual void OnRelease(const ReleaseEvent& event) {}
  virtual void OnExtend(const ExtendEvent& event) {}
  virtual void OnRenewal(const RenewalEvent& event) {}
  virtual void OnLeaseLost(const LeaseLostEvent& event) {}
  virtual void OnServerVote(const ServerVoteEvent& event) {}
  virtual void OnLateGrant(const LateGrantEvent& event) {}
};

// The observer that ignores everything. Never null; lives forever;
// thread-safe.
LockObserver* NoopLockObserver();

// `observer` if not null, else NoopLockObserver(). For components that take
// an optional observer in their options.
inline LockObserver* ObserverOrNoop(LockObserver* observer) {
  return observer != nullptr ? observer : NoopLockObserver();
}

// Formats each event as one line (no trailing newline) and hands it to
// `sink`, e.g.
//   acquire simple "orders/42": OK in 1.2ms (1 attempt, waited 0) fence=7 ttl=30s
//   renewal "orders/42": OK in 0.8ms, margin 19.9s (#3)
//   lost "orders/42" after 41s: DEADLINE_EXCEEDED: ...
//   late grant redlock acquire "orders/42" server #2: released again (lease released)
// Resources are printed escaped (C-style) so any byte is safe to print.
// Tokens are never printed. Thread-safe if `sink` is.
class TextLockObserver : public LockObserver {
 public:
  using Sink = absl::AnyInvocable<void(absl::string_view line)>;
  explicit TextLockObserver(Sink sink);

  void OnAcquire(const AcquireEvent& event) override;
  void OnAcquireWait(const AcquireWaitEvent& event) override;
  void OnRelease(const ReleaseEvent& event) override;
  void OnExtend(const ExtendEvent& event) override;
  void OnRenewal(const RenewalEvent& event) override;
  void OnLeaseLost(const LeaseLostEvent& event) override;
  void OnServerVote(const ServerVoteEvent& event) override;
  void OnLateGrant(const LateGrantEvent& event) override;

 private:
  Sink sink_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_OBSERVER_H_
