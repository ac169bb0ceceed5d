// This header defines `LeaseCommand`: THE way a lease policy sends one
// lease command to one server and reads its reply. A command is a value:
//
//   script   | the Lua script (EVALSHA, loaded first on a new connection),
//            | or nullptr: the plain `SET keys[0] args[0] NX PX args[1] GET`
//            | (the unfenced acquire with the restart window off, no ack)
//   keys     | its KEYS, as views
//   args     | its ARGV, as views
//   parser   | how its reply reads (Parser::Output)
//   ack      | replica acknowledgement (replica_ack.h; off: min_replicas 0)
//   after_tx | set only for the fenced exclusive acquire (AcquireScript):
//            | send it as ONE transaction instead (SendFencedAcquireTx,
//            | below), this script being its rare path; `script` stays the
//            | fallback for a transport without transactions (a cluster)
//            | and for replica acknowledgement
//
// Every single-server policy (SimpleLock and RedLock's rounds through
// LockCommands, ReentrantLock, Semaphore, ReadWriteLock, FairLock) builds
// its commands as LeaseCommands and sends them with Send(); the parsers
// every policy shares are below (FenceReply, OwnedReply, ReleaseNoticeReply).
//
// A parser is a small copyable value with
//   using Output = ...;  // what the callback gets, e.g. absl::StatusOr<int64_t>
//   Output operator()(absl::StatusOr<Reply> reply,
//                     absl::Span<const absl::string_view> keys) const;
//   WroteRule wrote() const;  // which replies replicas must acknowledge
// `keys` are the call's KEYS (to name them in an error). A transport failure
// passes through unchanged.
//
// Lifetime: `keys` and `args` are views that need to live only until Send()
// returns (build them on the caller's stack); the script must outlive the
// command (scripts are static). Call only on the loop's thread.
#ifndef DLOCK_LOCK_LEASE_COMMAND_H_
#define DLOCK_LOCK_LEASE_COMMAND_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

namespace dlock {

// The fenced exclusive acquire without a script on its common path
// (docs/fences.md, "The acquire as a transaction"). KEYS: lock, data-set
// marker, fence mark; ARGV: token, ttl ms, window ms (AcquireScript's).
// Sends ONE transaction:
//
//   MULTI / SET lock token NX PX ttl GET / INCR mark / GET marker /
//   [TIME, only with a window] / EXEC
//
// and reads EXEC's reply into what AcquireScript would have answered,
// which reaches `on_reply` (with the keys, as Script::Invoke gives them):
//   - SET answered an old value: nil (held; a string with no TTL reads as
//     held too, not as foreign data); WRONGTYPE: the foreign-data refusal;
//     INCR's +1 is then wasted, harmless (fences need only rise);
//   - SET set the key, INCR gave f, and f is VALID: the marker is "0"
//     (trusted: a missing mark starts at 0, so INCR's 1 is right) or a time
//     T with f > T x 1000 (a mark starts at max(TIME us, T x 1000) and only
//     grows; one recreated by INCRs since a loss stays far below): the
//     fence f, unless the window is on and neither the fast path (TIME us
//     - (f - 1) >= window) nor the full rule on the marker read passes;
//   - anything else (INCR failed, a missing, foreign or young marker, f
//     not valid, a reply of another shape): `after_tx` (AcquireAfterTxScript)
//     runs, atomically, while we hold the key, and its reply is the answer:
//     it raises a mark that is not valid to where a missing mark starts,
//     takes the fence by INCR, applies the restart rule, and deletes the
//     lock key on a refusal.
// Two clients racing on a lost mark (A's INCR 1, B's 2) both see f <= T x
// 1000 and both go through `after_tx`, which raises the mark past TIME
// first: neither hands out 1 or 2. Scripts that INCR the mark validate it
// the same way (script_prelude.h: DLOCK_FENCE_VALIDATE).
//
// A transport that answers SendTransaction with kUnimplemented (a
// cluster, a transport written outside dlock) gets `script` instead, as
// before. Each round trip is bounded by `timeout`. Returns the transport's
// rejection (then `on_reply` never runs); else `on_reply` runs once, never
// inside this call. The views need to live only until this call returns.
using AcquireReplyHandler =
    absl::AnyInvocable<void(absl::StatusOr<Reply>, absl::Span<const absl::string_view>) &&>;
absl::Status SendFencedAcquireTx(Transport& transport, const Script& script,
                                 const Script& after_tx,
                                 absl::Span<const absl::string_view> keys,
                                 absl::Span<const absl::string_view> args,
                                 absl::Duration timeout, AcquireReplyHandler on_reply);

// The fence a transaction's `INCR mark` gave, when it is VALID for the
// marker (`GET marker`) read in the same transaction and, with a restart
// window, passes the restart rule on `time` (TIME's reply; null without a
// window): a trusted data set (marker 0), or a mark above where the marker
// says it started, and a data set older than the window. Else 0: the rare
// path (a lost or foreign mark or marker, a young data set). Shared by the
// plain lock's transaction (SendFencedAcquireTx) and the writer's
// (SendWriteAcquireTx).
int64_t ValidTxFence(const Reply& incr, const Reply& marker, const Reply* time,
                     int64_t window_ms);

// LeaseCommand::Send's scripted path, compiled once: Script::Invoke's
// ScriptCall::Start (the handler of `handler_size` bytes built by
// `construct` in the call's one allocation) run through SendWithReplicaAck.
absl::Status SendLeaseScript(Transport& transport, const Script& script,
                             absl::Span<const absl::string_view> keys,
                             absl::Span<const absl::string_view> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteRule wrote, size_t handler_size,
                             absl::FunctionRef<script_internal::ScriptCall*(void*)> construct);

struct FenceReply;

template <typename Parser>
struct LeaseCommand {
  using Output = typename Parser::Output;

  const Script* script = nullptr;
  absl::Span<const absl::string_view> keys;
  absl::Span<const absl::string_view> args;
  Parser parser;
  ReplicaAckOptions ack;
  const Script* after_tx = nullptr;

  // Sends the command on `transport`, each round trip bounded by `timeout`
  // (with ack: WAIT right behind it, RunAcknowledged). `cb(Output)`
  // runs exactly once, never inside this call, unless this returns an error
  // (the transport's rejection, or kInvalidArgument: on a cluster, or an
  // ack not made by dlock::ReplicaAck()): then never. The callable is kept
  // inside the script call's one heap allocation (Script::Invoke).
  template <typename F>  // void(Output) &&
  absl::Status Send(Transport& transport, absl::Duration timeout, F cb) const {
    // Only the exclusive acquire (LockCommands::AcquireCommand, a
    // FenceReply) is ever sent without a script or as a transaction: the
    // other parsers' Send instances do not compile those two branches.
    if constexpr (std::is_same_v<Parser, FenceReply>) {
      if (script == nullptr) {
        return SendPlainSet(transport, timeout, std::move(cb));
      }
      if (after_tx != nullptr && ack.min_replicas == 0) {
        return SendTx(transport, timeout, std::move(cb));
      }
    }
    // The send itself is not a template (SendLeaseScript): with ack it
    // runs on the transport of the runner dlock::ReplicaAck() installed
    // (replica_ack_options.h), so the acknowledgement adds no code per
    // parser, and none at all to a program that never asks for it. Only
    // the handler -- parse, then the callback -- is made per callback type;
    // it lives in the script call's one allocation, as Script::Invoke's.
    auto on_reply = [parser = parser, cb = std::move(cb)](
                        absl::StatusOr<Reply> reply,
                        absl::Span<const absl::string_view> call_keys) mutable {
      std::move(cb)(parser(std::move(reply), call_keys));
    };
    using H = script_internal::Handler<decltype(on_reply)>;
    return SendLeaseScript(transport, *script, keys, args, timeout, ack, parser.wrote(),
                           sizeof(H), [&on_reply](void* mem) -> script_internal::ScriptCall* {
                             return new (mem) H(std::move(on_reply));
                           });
  }

 private:
  template <typename F>
  absl::Status SendPlainSet(Transport& transport, absl::Duration timeout, F cb) const {
    // No script: one plain command, the work of node-redlock's acquire
    // minus the Lua (FenceReply::set_get reads its reply). Never with
    // replica acknowledgement (LockCommands does not build it then).
    const absl::string_view argv[] = {"SET", keys[0], args[0], "NX", "PX", args[1], "GET"};
    return transport.SendArgv(
        argv, timeout,
        [parser = parser, key = std::string(keys[0]),
         cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
          const absl::string_view call_keys[] = {key};
          std::move(cb)(parser(std::move(reply), call_keys));
        });
  }
  template <typename F>
  absl::Status SendTx(Transport& transport, absl::Duration timeout, F cb) const {
    return SendFencedAcquireTx(
        transport, *script, *after_tx, keys, args, timeout,
        [parser = parser, cb = std::move(cb)](
            absl::StatusOr<Reply> reply,
            absl::Span<const absl::string_view> call_keys) mutable {
          std::move(cb)(parser(std::move(reply), call_keys));
        });
  }
};

template <typename Parser>
LeaseCommand<Parser> MakeLeaseCommand(const Script& script,
                                      absl::Span<const absl::string_view> keys,
                                      absl::Span<const absl::string_view> args, Parser parser,
                                      const ReplicaAckOptions& ack = ReplicaAckOptions()) {
  return LeaseCommand<Parser>{&script, keys, args, std::move(parser), ack};
}

// Where an acquire script's KEYS hold the keys its refusals name.
// The defaults: the plain and the semaphore acquire ({lock, data-set, fence
// mark}); the fence slot names the server's fence mark (keys.h).
struct AcquireKeySlots {
  size_t lock = 0;
  size_t fence = 2;
  size_t data_set = 1;
};

// The part every acquire reply shares: the transport's failure, a refusal
// (AcquireRefusalStatus: young data set, foreign data, exhausted fence),
// or kAborted `held` for nil; nullopt for anything else (a grant, or a
// reply of the wrong shape).
std::optional<absl::Status> AcquireNonGrant(const absl::StatusOr<Reply>& reply,
                                            absl::Span<const absl::string_view> keys,
                                            AcquireKeySlots slots, absl::string_view held);

// An acquire script's reply as the fence (an integer >= `min_fence`),
// AcquireNonGrant's status, or UnexpectedReplyStatus("acquire").
struct FenceReply {
  using Output = absl::StatusOr<int64_t>;
  int64_t min_fence = 1;
  absl::string_view held = "lock is held by another owner";  // a literal
  AcquireKeySlots slots;
  // The reply of a plain `SET NX PX GET` (LeaseCommand without a script):
  // nil = granted (fence 0), a string = held, WRONGTYPE = foreign data.
  bool set_get = false;

  absl::StatusOr<int64_t> operator()(absl::StatusOr<Reply> reply,
                                     absl::Span<const absl::string_view> keys) const;
  WroteRule wrote() const { return WroteRule::IntegerAtLeast(min_fence); }
};

// A 1/0 reply as OK / kFailedPrecondition "<what>: the lease no longer owns
// the key" (or `lost`, when set, as the whole message); anything else
// UnexpectedReplyStatus(what). Extends use it (wrote: a 1).
struct OwnedReply {
  using Output = absl::Status;
  absl::string_view what = "extend";  // a literal
  absl::string_view lost;             // a literal

  absl::Status operator()(absl::StatusOr<Reply> reply,
                          absl::Span<const absl::string_view> keys) const;
  WroteRule wrote() const { return WroteRule::IntegerIs(1); }
};

// A release that deleted the key: did its notification go out?
struct ReleaseNotice {
  // False when the server refused the PUBLISH (an ACL user without channel
  // permission); the key is deleted all the same.
  bool published = true;
  // The server's refusal when !published.
  std::string publish_error;
};

// A release script's reply: 1 deleted, 0 not owner (kFailedPrecondition),
// a string: deleted but the PUBLISH was refused.
struct ReleaseNoticeReply {
  using Output = absl::StatusOr<ReleaseNotice>;
  absl::StatusOr<ReleaseNotice> operator()(absl::StatusOr<Reply> reply,
                                           absl::Span<const absl::string_view> keys) const;
  WroteRule wrote() const { return WroteRule::Never(); }  // releases never wait
};

// The same readings as plain functions (for callers that hold a Reply):
// FenceReply with the keys of `resource` under `keys`;
absl::StatusOr<int64_t> AcquireReplyFence(const KeyScheme& keys, absl::string_view resource,
                                          const absl::StatusOr<Reply>& reply,
                                          int64_t min_fence = 1,
                                          absl::string_view held =
                                              "lock is held by another owner");
// ReleaseNoticeReply;
absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(absl::StatusOr<Reply> reply);
// OwnedReply{what}.
absl::Status OwnedReplyStatus(absl::string_view what, const absl::StatusOr<Reply>& reply);

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_COMMAND_H_
