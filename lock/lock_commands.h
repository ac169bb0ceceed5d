// This header defines `LockCommands`: the lock primitives on ONE Redis
// server, each a single atomic Lua script run through `Script` (EVALSHA with
// NOSCRIPT fallback). `SimpleLock` is a policy over one `LockCommands`;
// `RedLock` fans the same primitives out over N servers with one token.
//
// Keys of a resource R with prefix P (all share the hash tag {R}, so they
// sit in one Redis Cluster slot):
//   P{R}           the lock: a string holding the owner's token, with PX TTL
//   P{R}:fence     the fencing counter (no TTL; INCR by every acquire)
//   P{R}:released  the pub/sub channel a release publishes on
// ReentrantLock uses P{R} as a hash {owner -> count} instead of a string; a
// key of the other kind is foreign data to the acquire of both (kInternal,
// never overwritten).
// One more key per prefix and server, read by both acquire scripts:
//   P"data-set-began"  when the server's data set began (Unix ms; "0" when
//                      declared trusted) -- see scripts.h and RedLock's
//                      RESTART SAFETY.
// It has no hash tag, so it is not in the resource's Redis Cluster slot: the
// acquire scripts need a standalone server (or a Cluster routing the marker
// with the resource, not supported yet).
//
// Not thread-safe: call only on the loop's thread. The transport must
// outlive this object and every command it sent.
#ifndef DLOCK_LOCK_LOCK_COMMANDS_H_
#define DLOCK_LOCK_LOCK_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/reply.h"
#include "absl/functional/function_ref.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// The longest resource name accepted (bytes).
inline constexpr size_t kMaxResourceLength = 1024;
// Lease TTL bounds, the same for every policy (SimpleLock, ReentrantLock,
// RetryLock, RedLock, and the `dlock` tool's --ttl).
//
// kMinLeaseTtl = 10 ms. A lease is only worth having if it is still valid
// when the acquire reply arrives: its validity is ttl - drift allowance,
// counted from the send. With the default drift (1% + 2 ms) a 10 ms lease
// keeps 7.9 ms, room for a loopback round trip (about 0.1 ms idle, a few ms
// on a loaded machine). Below that an acquire is either useless or fails
// with a misleading kDeadlineExceeded (a 3 ms lease has 0.97 ms of validity).
inline constexpr absl::Duration kMinLeaseTtl = absl::Milliseconds(10);
// The least validity a lease must keep after its drift allowance. With
// non-default drift options this can raise the minimum above kMinLeaseTtl
// (see MinLeaseTtl); with the defaults it does not.
inline constexpr absl::Duration kMinLeaseValidity = absl::Milliseconds(5);
// The longest lease TTL: 30 days (a policy may have a lower maximum, e.g.
// RedLock's max_ttl).
inline constexpr absl::Duration kMaxTtl = absl::Hours(24 * 30);
// The old name of kMinLeaseTtl.
inline constexpr absl::Duration kMinTtl = kMinLeaseTtl;

// The default drift allowance of every policy: ttl * 1% + 2 ms (Redlock's).
inline constexpr double kDefaultDriftFactor = 0.01;
inline constexpr absl::Duration kDefaultDriftConstant = absl::Milliseconds(2);
// The drift allowance for `ttl`: ttl * factor + constant. A lease's local
// deadline is its send time + ttl - DriftAllowance(ttl).
absl::Duration DriftAllowance(absl::Duration ttl, double factor,
                              absl::Duration constant);
// The smallest TTL accepted under these drift options: kMinLeaseTtl, or
// more if the drift allowance would leave less than kMinLeaseValidity.
// Whole milliseconds. kMaxTtl + 1 ms if no TTL works (factor >= 1).
absl::Duration MinLeaseTtl(double drift_factor, absl::Duration drift_constant);

// THE lease TTL check of every policy. OK iff `ttl`, truncated to whole
// milliseconds (PX takes whole ms; leases record WholeMillis(ttl)), is in
// [MinLeaseTtl(drift_factor, drift_constant), max_ttl]. Otherwise
// kInvalidArgument, whose message states that range, e.g.
//   "ttl 3ms is outside the accepted range [10ms, 720h]"
// Also kInvalidArgument for drift options outside factor in [0, 1),
// constant >= 0, or max_ttl outside [kMinLeaseTtl, kMaxTtl].
absl::Status ValidateLeaseTtl(absl::Duration ttl, absl::Duration max_ttl = kMaxTtl,
                              double drift_factor = kDefaultDriftFactor,
                              absl::Duration drift_constant = kDefaultDriftConstant);

// kInvalidArgument unless `resource` is non-empty and at most
// kMaxResourceLength bytes (any byte allowed, NUL included).
absl::Status ValidateResource(absl::string_view resource);
// ValidateLeaseTtl(ttl) with the default maximum and drift: the check of
// LockCommands, RetryLock and the `dlock` tool.
absl::Status ValidateTtl(absl::Duration ttl);

// `ttl` as sent to Redis: whole milliseconds, truncated.
int64_t TtlMillis(absl::Duration ttl);
absl::Duration WholeMillis(absl::Duration ttl);

// A fresh random token: 128 bits from OpenSSL's OS-seeded CSPRNG, as 32
// lower-case hex characters. Thread-safe. Bytes are drawn 64 tokens at a time
// into a thread-local buffer that is discarded in the child of fork(), so a
// forked worker never repeats its parent's tokens (a raw clone(2) that skips
// pthread_atfork handlers is not covered).
std::string NewToken();

struct KeyScheme {
  std::string prefix = "dlock:";

  std::string LockKey(absl::string_view resource) const;      // P{R}
  std::string FenceKey(absl::string_view resource) const;     // P{R}:fence
  std::string ChannelKey(absl::string_view resource) const;   // P{R}:released
  // The data-set marker: when this server's data set began, as Unix ms,
  // set by the first acquire script that meets the server without it (the
  // server's TIME), "0" once declared trusted (TrustDataSetCommand). One per
  // prefix and server, never a lock key (it has no '{').
  std::string DataSetKey() const;                              // P + "data-set-began"
};

// The restart rule (RedLock always, SimpleLock/ReentrantLock as an option):
// a server whose data-set marker is younger than the restart window refuses
// every acquire with kUnavailable "data set began N ms ago ..."; this tells
// that refusal from other failures. The window must be >= the largest TTL
// any client of the deployment uses.
bool IsYoungDataSet(const absl::Status& status);
// For such a refusal: how long until the server's data set is old enough
// (zero for any other status).
absl::Duration YoungDataSetTimeLeft(const absl::Status& status);

// The command that declares a server's data set trusted: SET
// P"data-set-began" 0. Then the restart window never refuses it and fences
// of resources without a fence key start at 1. Only for a server whose data
// set is known to be complete: a never-used server, or one whose data
// survived (persistence). UNSAFE right after a restart that lost data:
// leases granted before it may still be live elsewhere, and fences would
// start again at 1. Used by test fixtures, examples and benchmarks so they
// need not wait the window. An admin does the same with
// `redis-cli SET dlock:data-set-began 0`.
std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys);

// Interprets the refusals the acquire scripts return as arrays (young data
// set, foreign data under the lock or marker key, exhausted fence counter).
// nullopt when `reply` is not one of them.
std::optional<absl::Status> AcquireRefusalStatus(const KeyScheme& keys,
                                                 absl::string_view resource,
                                                 const Reply& reply);

// Reply mapping shared by the policies (lock.h's error table), by the
// error's code (its first word; inside a script Redis 7 keeps the failing
// call's code):
//   NOPERM, NOAUTH, WRONGPASS, "ERR The user executing the script can't ..."
//       (an ACL refusal inside a script)                  kPermissionDenied
//   READONLY, OOM, LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
//       NOREPLICAS, MISCONF, "ERR max number of clients"  kUnavailable
//   WRONGTYPE, "value is not an integer" (foreign data under a lock or
//       fence key), "increment or decrement would overflow" (fence counter
//       at int64 max), any other ERR (unknown command, script error) or
//       unknown code                                      kInternal
// kUnavailable is transient (RetryLock retries it); the others are
// permanent and end a wait at once.
absl::Status ErrorReplyStatus(const Reply& reply);
// For a reply of a shape the script never produces: ErrorReplyStatus() for
// an error reply, otherwise kInternal naming `what`.
absl::Status UnexpectedReplyStatus(absl::string_view what, const Reply& reply);

// Every method below validates first and returns kInvalidArgument (callback
// never runs) for a bad resource (ValidateResource), an empty token, a bad
// ttl (ValidateTtl) or a non-positive timeout; otherwise it returns the
// transport's rejection or OK, and then `cb` runs exactly once, on the
// loop. `timeout` bounds each round trip (Script's NOSCRIPT fallback may add
// a second one). Transport failures pass through unchanged. The callbacks
// do not refer to this object: it may be destroyed with commands in flight.
// The shared end of a single-server acquire (SimpleLock, ReentrantLock):
// turns the acquire script's outcome into what the caller gets and reports it
// to `observer` as an AcquireEvent of `policy`. A granted key whose reply came
// at or after `deadline` (send time + ttl - drift) is no lease: `undo` runs and
// the result is kDeadlineExceeded. `undo` also runs for any failure other than
// kAborted, since the script may have run (an unknown outcome).
struct AcquireAttempt {
  absl::string_view policy;
  absl::string_view resource;
  absl::string_view token;
  absl::Duration ttl;
  absl::Time sent_at;
  absl::Time deadline;
};
absl::StatusOr<Lease> FinishAcquire(const AcquireAttempt& attempt,
                                    absl::StatusOr<int64_t> fence, absl::Time now,
                                    LockObserver* observer,
                                    absl::FunctionRef<void()> undo);

// Background retries of cleanups after unknown outcomes (SimpleLock,
// ReentrantLock). Stop() -- run when the lock is destroyed, since its
// transport may be destroyed right after -- cancels every timer not yet run
// and ignores later RunLater calls; the keys then expire by their TTL. A
// callback must keep alive whatever owns this object until it runs.
class BackgroundRetries {
 public:
  explicit BackgroundRetries(EventLoop* loop) : loop_(loop) {}
  void RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn);
  void Stop();

 private:
  EventLoop* const loop_;
  bool stopped_ = false;
  absl::flat_hash_set<TimerId> timers_;
};

// A release that deleted the key: did its notification go out?
struct ReleaseNotice {
  // False when the server refused the PUBLISH (an ACL user without channel
  // permission); the key is deleted all the same.
  bool published = true;
  // The server's refusal when !published.
  std::string publish_error;
};

// The warning a policy reports (ReleaseEvent::warning) for a release whose
// notification was refused: names `publish_error` and says that waiters
// will not be woken.
std::string UnpublishedReleaseWarning(absl::string_view publish_error);

class LockCommands {
 public:
  LockCommands(Transport* transport, KeyScheme keys);

  const KeyScheme& keys() const { return keys_; }
  Transport* transport() const { return transport_; }

  // SET P{R} token NX PX ttl; on success INCR P{R}:fence, all in one script,
  // after reading (or creating) the data-set marker. Callback: the new fence
  // value; kAborted if the key is held (a string with a TTL, this token
  // included); kUnavailable with IsYoungDataSet() when `restart_window` > 0
  // and the marker is younger than it; kInternal for foreign data under the
  // lock key (another type, or a string with no TTL) or the marker, and for
  // an exhausted fence counter; kUnavailable / kDeadlineExceeded /
  // kCancelled from the transport; ErrorReplyStatus() for an error reply.
  // A missing fence key starts at marker x 1000 (see scripts.h).
  absl::Status TryAcquire(absl::string_view resource, absl::string_view token,
                          absl::Duration ttl, absl::Duration timeout,
                          absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&> cb) {
    return TryAcquire(resource, token, ttl, absl::ZeroDuration(), timeout, std::move(cb));
  }
  absl::Status TryAcquire(absl::string_view resource, absl::string_view token,
                          absl::Duration ttl, absl::Duration restart_window,
                          absl::Duration timeout,
                          absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&> cb);

  // If P{R} == token: DEL it and PUBLISH on P{R}:released. OK (also when
  // the PUBLISH was refused: the key is gone), or kFailedPrecondition when
  // the key is gone or holds another value.
  absl::Status Release(absl::string_view resource, absl::string_view token,
                       absl::Duration timeout,
                       absl::AnyInvocable<void(absl::Status) &&> cb);
  // Release, telling on success whether the notification was published.
  absl::Status ReleaseNotifying(
      absl::string_view resource, absl::string_view token, absl::Duration timeout,
      absl::AnyInvocable<void(absl::StatusOr<ReleaseNotice>) &&> cb);

  // If P{R} == token: PEXPIRE it to ttl. OK, or kFailedPrecondition.
  absl::Status Extend(absl::string_view resource, absl::string_view token,
                      absl::Duration ttl, absl::Duration timeout,
                      absl::AnyInvocable<void(absl::Status) &&> cb);

  // RedLock's extend on a server that lost the key: if P{R} == token,
  // PEXPIRE; if P{R} does not exist, SET it to token PX ttl (never touches a
  // key holding another value). OK, or kFailedPrecondition.
  // Declares this server's data set trusted: TrustDataSetCommand(keys()).
  // OK once the server stored it; the transport's failure or kUnavailable
  // for an error reply otherwise. UNSAFE after a restart that lost data
  // (see TrustDataSetCommand); meant for a never-used server.
  absl::Status TrustDataSet(absl::Duration timeout,
                            absl::AnyInvocable<void(absl::Status) &&> cb);

  absl::Status ExtendOrReacquire(absl::string_view resource,
                                 absl::string_view token, absl::Duration ttl,
                                 absl::Duration timeout,
                                 absl::AnyInvocable<void(absl::Status) &&> cb);

 private:
  Transport* transport_;
  KeyScheme keys_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LOCK_COMMANDS_H_
