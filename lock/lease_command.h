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
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

template <typename Parser>
struct LeaseCommand {
  using Output = typename Parser::Output;

  const Script* script = nullptr;
  absl::Span<const absl::string_view> keys;
  absl::Span<const absl::string_view> args;
  Parser parser;
  ReplicaAckOptions ack;

  // Sends the command on `transport`, each round trip bounded by `timeout`
  // (with ack: WAIT right behind it, RunAcknowledged). `cb(Output)`
  // runs exactly once, never inside this call, unless this returns an error
  // (the transport's rejection, or kInvalidArgument: on a cluster, or an
  // ack not made by dlock::ReplicaAck()): then never. The callable is kept
  // inside the script call's one heap allocation (Script::Invoke).
  template <typename F>  // void(Output) &&
  absl::Status Send(Transport& transport, absl::Duration timeout, F cb) const {
    if (script == nullptr) {
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
    // One call site of Invoke per command type: with ack, SendWithReplicaAck
    // runs it on the transport of the runner dlock::ReplicaAck() installed
    // (replica_ack_options.h), so the acknowledgement adds no code per
    // parser, and none at all to a program that never asks for it.
    return SendWithReplicaAck(transport, ack, parser.wrote(), [&](Transport& t) {
      return script->Invoke(
          t, keys, args, timeout,
          [parser = parser, cb = std::move(cb)](
              absl::StatusOr<Reply> reply,
              absl::Span<const absl::string_view> call_keys) mutable {
            std::move(cb)(parser(std::move(reply), call_keys));
          });
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
