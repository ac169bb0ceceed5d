// This header defines `LockCommands`: the lock primitives on ONE Redis
// server, each a single atomic Lua script run through `Script` (EVALSHA,
// loaded on each connection first; Transport::SendScript keeps the order),
// or one atomic MULTI/EXEC (the fenced acquire's common path) or one plain
// command (the unfenced acquire). `SimpleLock` is a policy over one `LockCommands`;
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
#include "dlock/lock/lease_command.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/tokens.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {

// The replies' readings (FenceReply, OwnedReply, ReleaseNoticeReply and
// their plain-function forms AcquireReplyFence, ReleaseReplyNotice,
// OwnedReplyStatus): lease_command.h.

// The argv of one lease command of LockCommands, built on the caller's
// stack: the resource's keys and the numbers it sends. A LeaseCommand
// built into it holds views of it.
struct LeaseArgv {
  std::optional<ResourceKeys> resource_keys;
  char ttl_ms[absl::numbers_internal::kFastToBufferSize];
  char window_ms[absl::numbers_internal::kFastToBufferSize];
  absl::string_view keys[3];  // acquire: lock, marker, fence mark
  absl::string_view args[3];
  // The resource's slot's marker and fence mark on a cluster
  // (per_slot_data_set).
  std::string data_set_key;
  std::string fence_hwm_key;
};

// Every method below validates first and returns kInvalidArgument (callback
// never runs) for a bad resource (ValidateResource), an empty token, a bad
// ttl (ValidateTtl) or a non-positive timeout; otherwise it returns the
// transport's rejection or OK, and then `cb` runs exactly once, on the
// loop. `timeout` bounds the command (a NOSCRIPT re-send, or a late-safe
// script's one re-send after a SCRIPT FLUSH, counts against it too). Transport failures pass through unchanged. The callbacks
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

  // SET P{R} token NX PX ttl GET and INCR of the fence mark, as one
  // MULTI/EXEC with GET of the data-set marker (and TIME with a window),
  // the script only on its rare path, or as one script where the transport
  // has no transactions or with replica acknowledgement (lease_command.h:
  // SendFencedAcquireTx). Callback: the new fence value; kAborted if the
  // key is held (a string, this token included; on the transaction path a
  // string with no TTL reads as held too); kUnavailable with IsYoungDataSet() when `restart_window` > 0
  // and the marker is younger than it; kInternal for foreign data under the
  // lock key (another type, or a string with no TTL) or the marker, and for
  // an exhausted fence counter; kUnavailable / kDeadlineExceeded /
  // kCancelled from the transport; ErrorReplyStatus() for an error reply.
  // A missing fence mark starts where docs/fences.md says.
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
    absl::Status s = ValidateAcquireArgs(resource, token, ttl, restart_window, timeout);
    if (!s.ok()) return s;
    LeaseArgv a;
    return AcquireCommand(resource, token, ttl, restart_window, a)
        .Send(*transport_, timeout, std::move(cb));
  }

  // If P{R} == token: DEL it and PUBLISH on P{R}:released. OK (also when
  // the PUBLISH was refused: the key is gone), or kFailedPrecondition when
  // the key is gone or holds another value.
  template <typename F>  // void(absl::Status) &&
  absl::Status Release(absl::string_view resource, absl::string_view token,
                       absl::Duration timeout, F cb) {
    return ReleaseNotifying(resource, token, timeout,
                            [cb = std::move(cb)](absl::StatusOr<ReleaseNotice> n) mutable {
                              std::move(cb)(n.status());
                            });
  }
  // Release, telling on success whether the notification was published.
  template <typename F>  // void(absl::StatusOr<ReleaseNotice>) &&
  absl::Status ReleaseNotifying(absl::string_view resource, absl::string_view token,
                                absl::Duration timeout, F cb) {
    absl::Status s = ValidateCommandArgs(resource, token, timeout);
    if (!s.ok()) return s;
    LeaseArgv a;
    return ReleaseCommand(resource, token, a).Send(*transport_, timeout, std::move(cb));
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

  // The commands themselves, built into `a` and NOT validated: for callers
  // that checked their arguments once already (the policies, at Acquire /
  // Extend; the public methods above). Acquire and Extend carry this
  // object's replica acknowledgement; Release and ExtendOrReacquire never
  // wait.
  // `fencing` false: AcquireUnfencedScript (no fence mark; the grant's
  // fence is 0).
  LeaseCommand<FenceReply> AcquireCommand(absl::string_view resource,
                                          absl::string_view token, absl::Duration ttl,
                                          absl::Duration restart_window, LeaseArgv& a,
                                          bool fencing = true) const;
  LeaseCommand<ReleaseNoticeReply> ReleaseCommand(absl::string_view resource,
                                                  absl::string_view token,
                                                  LeaseArgv& a) const;
  LeaseCommand<OwnedReply> ExtendCommand(absl::string_view resource, absl::string_view token,
                                         absl::Duration ttl, LeaseArgv& a) const;
  LeaseCommand<OwnedReply> ExtendOrReacquireCommand(absl::string_view resource,
                                                    absl::string_view token,
                                                    absl::Duration ttl, LeaseArgv& a) const;

 private:
  // Fills a.resource_keys and a.args[0..1] = token, ttl_ms.
  void PrepareLeaseArgv(absl::string_view resource, absl::string_view token,
                        absl::Duration ttl, LeaseArgv& a) const;

  Transport* transport_;
  KeyScheme keys_;
  ReplicaAckOptions ack_;
  std::string data_set_key_;   // keys_.DataSetKey() (standalone), built once
  std::string fence_hwm_key_;  // keys_.FenceHwmKey() (standalone), built once
};

}  // namespace dlock

#endif  // DLOCK_LOCK_LOCK_COMMANDS_H_
