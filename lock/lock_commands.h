// This header defines `LockCommands`: the lock primitives on ONE Redis
// server, each a single atomic Lua script run through `Script` (EVALSHA with
// NOSCRIPT fallback). `SimpleLock` is a policy over one `LockCommands`;
// `RedLock` fans the same primitives out over N servers with one token.
// Its keys: keys.h; lease rules: lease_rules.h; tokens: tokens.h; reply
// mapping: reply_status.h (all included here, as they were part of this
// header before).
// Not thread-safe: call only on the loop's thread. The transport must
// outlive this object and every command it sent.
#ifndef DLOCK_LOCK_LOCK_COMMANDS_H_
#define DLOCK_LOCK_LOCK_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lease_ops.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/tokens.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {

// How the scripts' replies read (LockCommands, the Semaphore and the
// ReadWriteLock share them): an acquire script's reply as the fence (>=
// `min_fence`), kAborted `held` for nil (held), its refusals
// (AcquireRefusalStatus) or an unexpected reply's status;
absl::StatusOr<int64_t> AcquireReplyFence(const KeyScheme& keys, absl::string_view resource,
                                          const absl::StatusOr<Reply>& reply,
                                          int64_t min_fence = 1,
                                          absl::string_view held =
                                              "lock is held by another owner");
// a release script's reply (1 deleted, 0 not owner, a string: deleted but
// the PUBLISH was refused; ReleaseNotice and its report: lease_ops.h);
absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(absl::StatusOr<Reply> reply);
// a 1/0 reply as OK / kFailedPrecondition "<what>: the lease no longer owns
// the key". Transport failures pass through.
absl::Status OwnedReplyStatus(absl::string_view what, const absl::StatusOr<Reply>& reply);

// Every method below validates first and returns kInvalidArgument (callback
// never runs) for a bad resource (ValidateResource), an empty token, a bad
// ttl (ValidateTtl) or a non-positive timeout; otherwise it returns the
// transport's rejection or OK, and then `cb` runs exactly once, on the
// loop. `timeout` bounds each round trip (Script's NOSCRIPT fallback may add
// a second one). Transport failures pass through unchanged. The callbacks
// do not refer to this object: it may be destroyed with commands in flight.
class LockCommands {
 public:
  LockCommands(Transport* transport, KeyScheme keys);

  const KeyScheme& keys() const { return keys_; }
  Transport* transport() const { return transport_; }

  // Replica acknowledgement of grants (TryAcquire) and extends (Extend):
  // see replica_ack.h. Off by default. A grant or extend that too few
  // replicas acknowledged reaches the callback as kUnavailable
  // (IsReplicaShortfall); the key stays as the script left it, and the
  // caller (the policy) releases it. Release, ExtendOrReacquire and
  // TrustDataSet never wait.
  void set_replica_ack(const ReplicaAckOptions& ack) { ack_ = ack; }
  const ReplicaAckOptions& replica_ack() const { return ack_; }

  // SET P{R} token NX PX ttl and the next fence of the server's (slot's)
  // fence mark, all in one script, after the restart rule (the marker is
  // read only when `restart_window` > 0). Callback: the new fence value; kAborted if the key is held (a string with a TTL, this token
  // included); kUnavailable with IsYoungDataSet() when `restart_window` > 0
  // and the marker is younger than it; kInternal for foreign data under the
  // lock key (another type, or a string with no TTL) or the marker, and for
  // an exhausted fence counter; kUnavailable / kDeadlineExceeded /
  // kCancelled from the transport; ErrorReplyStatus() for an error reply.
  // Fences: script_prelude.h (FENCES).
  //
  // TryAcquire, Release and ReleaseNotifying take any move-only callable
  // (an AnyInvocable, a lambda): it is kept inside the script call's one
  // heap allocation (Script::Invoke) instead of being boxed again here.
  template <typename F>  // void(absl::StatusOr<int64_t>) &&
  absl::Status TryAcquire(absl::string_view resource, absl::string_view token,
                          absl::Duration ttl, absl::Duration timeout, F cb) {
    return TryAcquire(resource, token, ttl, absl::ZeroDuration(), timeout, std::move(cb));
  }
  template <typename F>  // void(absl::StatusOr<int64_t>) &&
  absl::Status TryAcquire(absl::string_view resource, absl::string_view token,
                          absl::Duration ttl, absl::Duration restart_window,
                          absl::Duration timeout, F cb) {
    AcquireArgv a;
    absl::Status s = PrepareAcquire(resource, token, ttl, restart_window, timeout, a);
    if (!s.ok()) return s;
    if (ack_.min_replicas > 0) {
      // Acknowledged (replica_ack.h): WAIT right behind the script. Not the
      // allocation-lean path: it costs a replication round trip anyway.
      return RunAcknowledged(
          AcquireScript(), *transport_, {a.keys, a.keys + 4}, {a.args, a.args + 3}, timeout,
          ack_, [](const Reply& r) { return r.is_integer() && r.integer >= 1; },
          [cb = std::move(cb), keys = std::vector<std::string>(a.keys, a.keys + 4)](
              absl::StatusOr<Reply> reply) mutable {
            const absl::string_view views[] = {keys[0], keys[1], keys[2], keys[3]};
            std::move(cb)(AcquireReplyFence(std::move(reply), views));
          });
    }
    return AcquireScript().Invoke(
        *transport_, a.keys, a.args, timeout,
        [cb = std::move(cb)](absl::StatusOr<Reply> reply,
                             absl::Span<const absl::string_view> keys) mutable {
          std::move(cb)(AcquireReplyFence(std::move(reply), keys));
        });
  }

  // If P{R} == token: DEL it and PUBLISH on P{R}:released. OK (also when
  // the PUBLISH was refused: the key is gone), or kFailedPrecondition when
  // the key is gone or holds another value.
  template <typename F>  // void(absl::Status) &&
  absl::Status Release(absl::string_view resource, absl::string_view token,
                       absl::Duration timeout, F cb) {
    return SendRelease(resource, token, timeout,
                       [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
                         std::move(cb)(dlock::ReleaseReplyNotice(std::move(reply)).status());
                       });
  }
  // Release, telling on success whether the notification was published.
  template <typename F>  // void(absl::StatusOr<ReleaseNotice>) &&
  absl::Status ReleaseNotifying(absl::string_view resource, absl::string_view token,
                                absl::Duration timeout, F cb) {
    return SendRelease(resource, token, timeout,
                       [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
                         std::move(cb)(dlock::ReleaseReplyNotice(std::move(reply)));
                       });
  }

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
  // The acquire script's argv, built on the caller's stack.
  struct AcquireArgv {
    std::optional<ResourceKeys> resource_keys;
    char ttl_ms[absl::numbers_internal::kFastToBufferSize];
    char window_ms[absl::numbers_internal::kFastToBufferSize];
    absl::string_view keys[3];  // lock, marker, fence mark
    absl::string_view args[3];
    // The resource's slot's marker and fence mark on a cluster
    // (per_slot_data_set).
    std::string data_set_key;
    std::string fence_hwm_key;
  };
  absl::Status PrepareAcquire(absl::string_view resource, absl::string_view token,
                              absl::Duration ttl, absl::Duration restart_window,
                              absl::Duration timeout, AcquireArgv& a) const;
  // The acquire script's reply (`keys`: its KEYS, to name them in errors).
  static absl::StatusOr<int64_t> AcquireReplyFence(absl::StatusOr<Reply> reply,
                                                   absl::Span<const absl::string_view> keys);

  template <typename F>  // void(absl::StatusOr<Reply>) &&
  absl::Status SendRelease(absl::string_view resource, absl::string_view token,
                           absl::Duration timeout, F on_reply) {
    absl::Status s = ValidateCommandArgs(resource, token, timeout);
    if (!s.ok()) return s;
    const ResourceKeys k(keys_.prefix, resource);
    const absl::string_view keys[] = {k.lock()};
    const absl::string_view args[] = {token, k.channel()};
    return ReleaseScript().Invoke(*transport_, keys, args, timeout, std::move(on_reply));
  }
  absl::Status SendExtend(const Script& script, absl::string_view resource,
                          absl::string_view token, absl::Duration ttl,
                          absl::Duration timeout,
                          absl::AnyInvocable<void(absl::Status) &&> cb);

  Transport* transport_;
  KeyScheme keys_;
  ReplicaAckOptions ack_;
  std::string data_set_key_;   // keys_.DataSetKey() (standalone), built once
  std::string fence_hwm_key_;  // keys_.FenceHwmKey() (standalone), built once
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LOCK_COMMANDS_H_
