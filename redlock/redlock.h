// This header defines `RedLock`, a `Lock` whose leases are granted by a
// quorum of N independent Redis servers (the Redlock algorithm of
// https://redis.io/docs/manual/patterns/distributed-locks/), and
// `RedLockOptions`, its configuration.
//
//   RedLockOptions options;                       // defaults below
//   absl::StatusOr<std::unique_ptr<RedLock>> lock =
//       RedLock::Create(&loop, {&t1, &t2, &t3, &t4, &t5}, options);
//   (*lock)->Acquire("orders/42", {.ttl = absl::Seconds(10)},
//                    [](absl::StatusOr<Lease> lease) { ... });
//
// Every server is reached through its own `Transport` (one connection per
// server, all on one `EventLoop`); the servers must be independent (not
// replicas of one another), or the quorum means nothing.
//
// ACQUIRE. One attempt:
//   1. A fresh 128-bit token is drawn (`NewToken()`); the same token goes to
//      every server. T0 = `loop->Now()` is taken, then the acquire script
//      (SET NX PX + INCR of the fencing counter, `LockCommands::TryAcquire`)
//      is sent to ALL servers in the same loop turn -- not one after another
//      -- each with the per-server timeout (see `server_timeout`).
//   2. Votes are counted as replies come in. The attempt is decided as soon
//      as its outcome is known: `quorum` servers granted, or so many refused
//      or failed that `quorum` grants are impossible. Stragglers are not
//      waited for. At T0 + server_timeout every server still silent counts
//      as failed (timed out).
//   3. Validity = ttl - (Now() - T0) - drift, where drift = ttl x
//      drift_factor + 2 ms. The attempt succeeds only with a quorum AND a
//      validity > 0 at the moment it is decided. The lease then has
//        lease.ttl      = ttl
//        lease.deadline = T0 + ttl - drift
//      i.e. the validity is counted from the FIRST SEND, never from a reply.
//   4. Fencing (see FENCING below): if the granting servers returned
//      different counters, the maximum is written back to them first.
//   5. On failure (no quorum, validity <= 0, timeouts, cancel, shutdown) the
//      token is released on EVERY server, including those that did not
//      answer (their SET may have landed) and those that answered after the
//      decision; a late grant after the attempt was given up is released
//      again when its reply arrives. When the LAST attempt fails, the
//      callback runs only after every server that did not time out in that
//      attempt answered the release (each bounded by the per-server
//      timeout): on a failure, no key of this Acquire is left on a server
//      that answered.
//
// RETRIES. After a failed attempt RedLock waits retry_delay +/-
// retry_jitter (uniform; never negative) and tries again with a NEW token:
//   - `AcquireOptions::wait == 0`: at most `retry_count` retries.
//   - `AcquireOptions::wait > 0`: retries while the next attempt would start
//     within `wait` of the Acquire call; `retry_count` is then ignored.
// An attempt is never blocked by leftovers of an earlier attempt of the
// same Acquire: the release of attempt k is sent when attempt k is decided,
// on the same connection and therefore executed by each server before
// anything sent later (if an acquire had to fall back from EVALSHA to EVAL
// it may run after that release; its late grant is then released again);
// a release that could not be confirmed (timeout, connection lost) is sent
// again -- while its key could still exist -- just before attempt k+1's
// acquire on that server, in the same write. So on every server that is
// reachable when attempt k+1 starts, attempt k's key is gone before attempt
// k+1 arrives. A leftover on a server unreachable then can only expire (at
// most ttl after it was set).
//
// ERRORS of Acquire (the last attempt's; the message gives the counts):
//   kAborted          quorum impossible and at least one server was held
//                     by another owner (contention)
//   kUnavailable      quorum impossible without contention: servers down,
//                     error replies, per-server timeouts, or servers whose
//                     data set is young (RESTART SAFETY)
//   kDeadlineExceeded quorum reached too late: validity <= 0
//   kCancelled        the RedLock was destroyed (shutdown)
//   kInvalidArgument  from the call: bad resource, ttl <= drift, ttl >
//                     max_ttl, wait < 0; from the call or the callback: two
//                     listed servers are the same Redis instance
// (Foreign data under a lock key, or an exhausted fence counter -- kInternal
// from that server -- counts as that server failing; it is never the overall
// result.)
//
// EXTEND (`Extend(lease, ttl)`) runs `LockCommands::ExtendOrReacquire` on
// every server in parallel: PEXPIRE where the key still holds lease.token,
// SET it again (same token) where the key is gone (e.g. the server
// restarted), never touch another owner's key. It succeeds with a quorum of
// such votes decided before the OLD lease.deadline and with a new validity
// > 0; the new lease has ttl = `ttl` and deadline = T1 + ttl - drift, T1
// being when the extend was sent. The fence is unchanged. Errors:
//   kFailedPrecondition  the lease had expired locally at the call, or so
//                        many servers hold another owner's key that a
//                        quorum is impossible: the lease is lost
//   kUnavailable         no quorum for other reasons (down, timeouts,
//                        restart quarantine); may be retried while the old
//                        deadline lasts
//   kDeadlineExceeded    the old deadline (or the new validity) ran out
//                        before a quorum answered
// Also kFailedPrecondition: the lease was released (Release called) before
// the Extend, or while it was in flight (see LATE GRANTS).
// A failed Extend removes nothing; keys it did extend keep their new TTL.
// If `ttl` is shorter than what is left of the lease, a failed Extend may
// have shortened some keys: then treat the lease as valid only until
// min(lease.deadline, T1 + ttl - drift).
//
// RELEASE sends the compare-and-delete to every server in parallel. Its
// callback MAY FIRE AT QUORUM, before every server answered: as soon as
// `quorum` servers confirmed and one of them deleted the key (OK), or a
// quorum of confirmations became impossible (kUnavailable). The servers
// still outstanding complete in the background: each reply is reported to
// the observer (OnServerVote, operation "release"), never dropped, and a
// key a straggler still holds is deleted when its release arrives (or
// expires with its TTL). While only "did not hold the token" answers are
// in, it waits for the rest, up to `release_timeout` (default the larger
// of the per-server timeout and 1 s; a release protects no validity, so it
// is not held to acquire's short deadline). Outcomes:
//   OK                   at least `quorum` servers confirmed the key no
//                        longer holds the token (deleted or already gone)
//                        and at least one of them deleted it
//   kFailedPrecondition  at least `quorum` confirmed, none had the token:
//                        the lease had already expired everywhere
//   kUnavailable         fewer than `quorum` confirmed (servers down):
//                        what is left expires with its TTL
//
// LATE GRANTS. No key outlives its lease's release. A grant that arrives
// when nobody can use it any more is released again on its server, by its
// own token (compare-and-delete: never another owner's key), and reported
// (OnLateGrant, observer.h):
//   - a straggler of the attempt that won, when Release(lease) was called
//     before it arrived (its release may have failed on that server, or run
//     before the acquire through a NOSCRIPT fallback): reason "released";
//   - a grant of an attempt that failed: "lost"; of one abandoned by Cancel
//     or the RedLock's destruction: "cancelled" (see ACQUIRE step 5);
//   - an extend that succeeded on a server after Release(lease) was called
//     (ExtendOrReacquire sets a missing key again, so a late extend could
//     re-create a released lease): "released", operation "extend"; that
//     Extend reports kFailedPrecondition.
// An operation whose grants may still arrive watches its lease's token
// until they did (exact: no grant of a lease released through this RedLock
// is missed). Extend of a released lease is refused on a later turn with
// kFailedPrecondition, nothing sent, for the lease's ttl after the release
// as long as it is among the RedLock's last 64 releases
// (redlock_internal::Core::kRememberedReleases); past that an Extend of it
// could set its keys again. Releases by other processes are not known here:
// what keeps their keys gone is the per-connection command order.
// See docs/late-grants.md.
//
// FENCING. Each server keeps its own counter -- its fence high-water mark
// P"fence-hwm" (per slot on a Cluster), shared by every resource, raised by
// every grant there (lock/script_prelude.h, FENCES). lease.fence = the
// maximum of the counters returned by
// the servers of the granting quorum. Before the lease is handed out, that
// maximum is written back (raised, never lowered) on granting servers until
// a quorum of them holds a counter >= lease.fence (usually nothing to do:
// the counters agree once a write-back brought them level, since every
// grant adds 1 on each server; lagging servers that grant late are raised
// in the background too, so the counters converge). If no quorum confirms in time,
// the attempt fails (kUnavailable) like any other. Guarantee: if lease L2 of a resource is granted after
// lease L1 of it ended (L1 released, or its deadline passed), then
// L2.fence > L1.fence -- because L1's quorum and L2's quorum share a server
// whose counter was >= L1.fence while L1 held its key there, and L2's grant
// there incremented it. The maximum alone, without the write-back, would
// not guarantee this: counters drift apart when attempts land on subsets of
// servers. A counter that is lost (restart without persistence, FLUSHALL)
// does not go backwards: a missing mark starts at the server's TIME in us
// (lock/script_prelude.h says what that assumes of TIME), and the restart
// window keeps that server from voting until its TIME is far past any fence
// of its peers; a trusted marker (0) starts the mark at 0, which is why
// trusting a data set after a data loss is unsafe. Counters are exact up to 2^53 - 1; beyond, acquire is
// kInternal "fencing counter ... exhausted" from that server. Fences of
// different resources are unrelated. With RedLockOptions::fencing off none
// of this runs: every lease's fence is 0. Two leases that overlap in time cannot
// both exist (that is the lock's job), but a holder paused past its
// deadline still holds its old fence: the protected resource must reject
// fences smaller than the largest it has seen.
//
// RESTART SAFETY (the "delayed restart" rule of the algorithm's analysis,
// `delayed_restart`, default on). A server restarted without persistence (or
// FLUSHALLed) may have lost keys it granted to leases still held; it must
// not vote until every such lease has expired. Each server carries a DATA-SET
// MARKER, KeyScheme::DataSetKey() (P"data-set-began"): the server's TIME in
// ms when its current data set was first used by dlock. The acquire script
// creates it on first contact and reads it atomically with the acquire. A
// server whose marker is younger than the restart window (`restart_window`,
// default max_ttl) refuses the acquire ("data set began N ms ago ...: young,
// M ms left"): the vote is simply not granted, and the key is not set. The
// server does this for EVERY client, however fresh (one that never saw the
// server before the restart included), and through proxies. A persisted
// server keeps its marker (and its keys); FLUSHALL, eviction of the marker,
// or a restart without persistence start a new, young data set. Rules:
//   - Every client of a deployment must use a window >= the largest ttl any
//     client uses (the window is sent by the acquiring client). RedLock
//     refuses restart_window < max_ttl.
//   - A brand-new server is quarantined for the window after first contact.
//     To use a never-used server at once, declare its data set trusted:
//     `redis-cli SET dlock:data-set-began 0` (TrustDataSetCommand()); test
//     fixtures, examples and benchmarks do this. UNSAFE after a restart that
//     lost data: it lifts the quarantine that protects live leases, and
//     fences of resources whose counter was lost would start again at 1.
//   - Upgrading a deployment whose servers have no marker yet: they are
//     young for the window after the upgrade, unless declared trusted (safe
//     when their data is intact).
// Extend's script does not read the marker; its votes are still gated by
// the run_id: RedLock learns each server's `run_id` (`INFO server`, in the
// same write as the first lock command) once per connection, after a failed
// command, and -- with `check_run_id_every_command` or a transport that
// cannot name its connections (connection_epoch() == 0) -- with every
// Extend. An extend vote counts only if the run_id was confirmed for it and
// no restart (changed run_id) was seen within the window. The run_id also
// detects one Redis instance listed twice (same address under two names, or
// two DB numbers): every later Acquire and Extend then fails with
// kInvalidArgument ("... are the same Redis instance ..."), the attempt in
// flight too, without retries. (Until both listings' INFO answered, a
// quorum of other, distinct servers can still grant the first lease: that
// lease is sound; and a server whose INFO is renamed or denied is not
// checked.) With `delayed_restart` off, nothing is quarantined: the window
// sent is 0, and run_ids only serve the duplicate check.
//
// OBSERVER (`options.observer`): OnAcquire, OnAcquireWait (before each
// retry), OnRelease and OnExtend with policy "redlock", OnServerVote
// for every per-server reply, with operation "acquire", "extend",
// "release" or "fence" (the fencing write-back), and OnLateGrant for every
// late grant released again (LATE GRANTS).
//
// LIFETIMES. The loop and the transports are not owned and must outlive
// the RedLock and every command it sent. Destroying the RedLock ends every
// pending operation: its callback is posted to the loop with kCancelled
// (never run inside the destructor), and whatever an unfinished Acquire
// took is released in the background. A user callback may destroy the
// RedLock.
//
// Not thread-safe: call only on the thread running `loop`.
#ifndef DLOCK_REDLOCK_REDLOCK_H_
#define DLOCK_REDLOCK_REDLOCK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

struct RedLockOptions {
  // Grants needed. 0 (default): N/2 + 1. Otherwise it must lie in
  // [N/2 + 1, N] (a smaller quorum would let two holders coexist).
  int quorum = 0;

  // Retries after the first attempt when AcquireOptions::wait is zero.
  // Default 3 (so at most 4 attempts). Must be >= 0.
  int retry_count = 3;
  // Pause between attempts: retry_delay + uniform(-retry_jitter,
  // +retry_jitter), at least 0. Defaults 200 ms and 100 ms (as in
  // node-redlock). Both must be >= 0.
  absl::Duration retry_delay = absl::Milliseconds(200);
  absl::Duration retry_jitter = absl::Milliseconds(100);

  // Clock drift allowance: drift = ttl x drift_factor + 2 ms. Default 0.01
  // (as in the algorithm's description). Must be in [0, 0.5).
  double drift_factor = 0.01;

  // The deadline of each per-server command (acquire, extend, release,
  // fence write-back, INFO), and of each voting round. Zero (default):
  // min(ttl / 10, 50 ms), at least 1 ms -- "small compared to the TTL", as
  // the algorithm asks, so a dead or stopped server costs an attempt at
  // most that long. Set it explicitly for slow links. Must be >= 0.
  absl::Duration server_timeout = absl::ZeroDuration();

  // The delayed-restart rule (see RESTART SAFETY). Default on.
  bool delayed_restart = true;
  // Fencing tokens (see FENCING). Default on. Off: each server's acquire is
  // SET NX PX alone (no fence mark read, written or synced) and every
  // lease's fence is 0 -- the work node-redlock and redsync do, for a
  // resource that cannot check a fence anyway. With delayed_restart off
  // too, each server's acquire is one plain `SET NX PX GET` (no script;
  // SimpleLockOptions::fencing).
  bool fencing = true;
  // Send `INFO server` with every Extend instead of once per connection
  // (see RESTART SAFETY). Default off; turn it on when a proxy (twemproxy,
  // Envoy, a Sentinel-aware load balancer) stands between the client and the
  // servers. Acquire does not need it (the data-set marker is checked by the
  // server inside the acquire script).
  bool check_run_id_every_command = false;
  // The largest ttl Acquire and Extend accept. Default 60 s. Must be in
  // [kMinTtl, kMaxTtl].
  absl::Duration max_ttl = absl::Seconds(60);
  // The restart window of the delayed-restart rule: a server whose data set
  // began (KeyScheme::DataSetKey) less than this long ago grants no acquire,
  // and a restart seen through its run_id keeps its extend votes out this
  // long. Zero (default): max_ttl. Must be 0 or >= max_ttl. EVERY client of
  // a deployment must use a window >= the largest ttl ANY client uses (the
  // rule is enforced by each server for the window the acquiring client
  // sends, so a client with a short window could take a lock a long-ttl
  // holder lost in a restart).
  absl::Duration restart_window = absl::ZeroDuration();
  // The deadline of each per-server command of Release. Zero (default): the
  // larger of the per-server timeout and 1 s. A release protects no
  // validity, so it waits for a loaded server rather than report keys that
  // are in fact gone as not released. Must be >= 0.
  absl::Duration release_timeout = absl::ZeroDuration();

  // Key names on every server (prefix "dlock:" by default).
  KeyScheme keys;

  // Optional names of the servers for observer events (e.g.
  // "10.0.0.1:6379"): empty, or one per server.
  std::vector<std::string> server_names;
  // Not owned; null means no observer. Must outlive the RedLock; once the
  // RedLock is destroyed it is never called again, even by the background
  // releases still in flight.
  LockObserver* observer = nullptr;

  // Seed of the retry-jitter generator; 0 (default) seeds from the OS.
  // Tokens are always from NewToken(), never from this generator.
  uint64_t jitter_seed = 0;
};

namespace redlock_internal {
class Core;
}  // namespace redlock_internal

class RedLock : public Lock, private ReleaseNotifier {
 public:
  // Builds a RedLock over `servers` (one Transport per independent Redis
  // server, N >= 1). kInvalidArgument when `loop` is null, `servers` is
  // empty or holds a null or repeated transport, the quorum is outside
  // [N/2 + 1, N], or another option is out of its range.
  static absl::StatusOr<std::unique_ptr<RedLock>> Create(
      EventLoop* loop, std::vector<Transport*> servers,
      RedLockOptions options = {});

  // Ends every pending operation (see LIFETIMES above).
  ~RedLock() override;

  RedLock(const RedLock&) = delete;
  RedLock& operator=(const RedLock&) = delete;

  // Lock. See the header comment for the algorithm and every outcome.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;
  // The checks Acquire makes from the call: resource, ttl under this lock's
  // drift_factor and max_ttl, wait >= 0 (a RetryLock queueing a wait without
  // an attempt asks this, not the common ttl rule).
  absl::Status CheckAcquireArgs(absl::string_view resource,
                                const AcquireOptions& options) const override;
  absl::Status Release(const Lease& lease, StatusCallback callback) override;
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  // Every release publishes on KeyScheme::ChannelKey on each server it
  // releases on; a waiter (RetryLock) subscribes on the first server (index
  // 0) and, for releases that server misses, falls back on its backoff.
  const ReleaseNotifier* release_notifier() const override { return this; }

  size_t server_count() const;
  int quorum() const;
  // The per-server deadline used for an operation with this ttl.
  absl::Duration ServerTimeout(absl::Duration ttl) const;
  // ttl x drift_factor + 2 ms.
  absl::Duration DriftAllowance(absl::Duration ttl) const;

  // What RedLock knows about one server (index into the Create list).
  struct ServerStatus {
    // Last run_id seen; empty until the first INFO answered.
    std::string run_id;
    // Restarts observed (run_id changes).
    int restarts_observed = 0;
    // True while delayed_restart keeps this server's votes out: its data
    // set was young at its last acquire reply, or a restart was seen.
    bool quarantined = false;
    // When its votes count again (InfinitePast when not quarantined).
    absl::Time counted_again_at = absl::InfinitePast();
  };
  ServerStatus server_status(size_t index) const;

 private:
  explicit RedLock(std::shared_ptr<redlock_internal::Core> core);

  // ReleaseNotifier.
  std::string ReleaseChannel(absl::string_view resource) const override;
  Transport* ReleaseSubscriber() const override;

  std::shared_ptr<redlock_internal::Core> core_;
};

}  // namespace dlock

#endif  // DLOCK_REDLOCK_REDLOCK_H_
