// This header defines `Transport`, how dlock sends commands to one Redis
// server, and `Subscription`, a pub/sub channel listener.
//
// Implementations:
//   - `HiredisTransport` (//transport/uv): hiredis async API on libuv.
//   - `FakeTransport` (//transport/fake): a connection to an in-memory
//     `FakeRedis`, with fault injection.
//
// Contract shared by all implementations:
//   - A command is an argv of byte strings (any byte, NUL included).
//   - `Send` either rejects the command at once (non-OK Status returned; the
//     callback is destroyed and never runs), or accepts it, and then the
//     callback runs exactly once, on the loop, never inside `Send` itself,
//     even when the answer is known at once.
//   - The callback gets a `Reply` when the server answered (an error reply
//     such as "NOSCRIPT ..." is a Reply of type kError), or a Status when it
//     did not: kDeadlineExceeded when `timeout` passed first (the command may
//     still have run on the server), kUnavailable when the connection is down
//     or was lost (again the command may have run), kCancelled when the
//     transport was closed.
//   - Commands sent in one loop turn are written together (pipelining) and
//     answered in order.
//   - Order (issue 22): a command sent after another on one transport is
//     applied on the server after it, scripts included, whatever the
//     server's script cache holds. A script sent with `SendScript` is never
//     re-sent behind a later command: when a `NOSCRIPT` reply (the cache was
//     flushed under the connection: `SCRIPT FLUSH`, or Redis >= 7.4 evicting
//     scripts) finds that something was sent after the script on the same
//     connection, the script did not run and the callback gets kUnavailable
//     ("the server's script cache was flushed under the connection"), never
//     a reordered re-send. A transport that forwards to others (Sentinel,
//     Cluster) keeps the order per connection it forwards to: commands that
//     went to different nodes have no order between them.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_TRANSPORT_H_
#define DLOCK_TRANSPORT_TRANSPORT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/reply.h"

namespace dlock {

using ReplyCallback = absl::AnyInvocable<void(absl::StatusOr<Reply>) &&>;

// Called for every message published on a subscribed channel.
using MessageCallback =
    absl::AnyInvocable<void(absl::string_view channel, absl::string_view message)>;

// A live subscription. Destroying it unsubscribes: after the destructor
// returns, its `on_message` never runs again.
class Subscription {
 public:
  virtual ~Subscription() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Sends `argv` (non-empty; argv[0] is the command name) and calls
  // `callback` exactly once with the reply or the failure (see above).
  // `timeout` bounds the wait for the reply and must be positive.
  // Returns kInvalidArgument for an empty argv or a non-positive timeout,
  // kCancelled after Close(); the callback then never runs.
  virtual absl::Status Send(std::vector<std::string> argv,
                            absl::Duration timeout,
                            ReplyCallback callback) = 0;

  // `Send` for an argv the caller keeps: the views need to live only until
  // this call returns (the transport copies whatever it must keep, e.g.
  // while waiting for a connection). Same contract and rejections as Send.
  // The hot path of the lock scripts uses it so a command's arguments are
  // built once, straight into what the transport writes. Default: copies
  // into a vector and calls Send; HiredisTransport formats the views
  // directly.
  virtual absl::Status SendArgv(absl::Span<const absl::string_view> argv,
                                absl::Duration timeout, ReplyCallback callback) {
    std::vector<std::string> owned;
    owned.reserve(argv.size());
    for (absl::string_view a : argv) owned.emplace_back(a);
    return Send(std::move(owned), timeout, std::move(callback));
  }

  // Runs a Lua script, keeping the order above. `evalsha_argv` is
  // `EVALSHA sha1 numkeys keys... args...` (at least 3 entries; argv[1] is
  // the lower-case hex SHA-1 of `body`); `body` is the script's source.
  // The reply is the script's, as EVAL would give it: a NOSCRIPT reply never
  // reaches the callback (see the order rule above; it becomes kUnavailable
  // when the script could not be re-sent in order).
  //
  // Lifetime: `body` and the views of `evalsha_argv` must stay valid until
  // the callback has run or been destroyed (a connection may write them
  // later: while it waits to connect, or to re-send after a flush). Script
  // (script.h) keeps them in the call's one allocation.
  //
  // Same rejections as Send, plus kInvalidArgument for fewer than 3 argv
  // entries. The default (for transports written outside dlock) sends
  // `EVAL body numkeys keys... args...` through SendArgv: always in order,
  // whatever the cache holds, at the cost of the body on every call. The
  // real connections (ReconnectingTransport: hiredis and TLS; FakeTransport)
  // keep, per connection, the SHA-1s known loaded on it: a script not yet
  // known goes out as `SCRIPT LOAD body` pipelined right before its EVALSHA
  // (SCRIPT LOAD, not EVAL: Redis >= 7.4 may evict scripts loaded by EVAL,
  // never those loaded by SCRIPT LOAD), so the EVALSHA behind it finds it
  // whatever happened before; the set starts empty on every new connection.
  // Forwarding transports (Sentinel, Cluster, UvTransport) forward it.
  virtual absl::Status SendScript(absl::string_view body,
                                  absl::Span<const absl::string_view> evalsha_argv,
                                  absl::Duration timeout, ReplyCallback callback);

  // Runs `commands` (each a non-empty argv) as ONE transaction: `MULTI`,
  // the commands, `EXEC`, written together on one connection (never split
  // by a reconnect: all or none of them go out on a connection), in order
  // with the other commands of this transport. The callback runs once (same
  // contract as Send) with EXEC's reply: an array of one reply per command
  // (an error reply among them is that command's failure; the others ran),
  // or an error reply when none ran: a command (or MULTI itself, e.g. an
  // ACL NOPERM) was refused while queuing. The hiredis/TLS connections
  // answer with that first refusal, which says why; a transport that only
  // sees EXEC's reply (the fake) answers EXECABORT. Nothing else runs on the server between the commands.
  //
  // The views need to live only until this call returns. Rejections as
  // Send, plus kInvalidArgument for no commands or an empty one. The
  // default returns kUnimplemented (and never calls back): a transport
  // written outside dlock, or one that cannot keep a group on one
  // connection (ClusterTransport, which routes each command by its key);
  // callers then fall back to a script (lock/lease_command.h). The real
  // connections (ReconnectingTransport: hiredis and TLS; FakeTransport)
  // implement it; UvTransport and Sentinel forward it.
  virtual absl::Status SendTransaction(
      absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout,
      ReplyCallback callback) {
    (void)commands;
    (void)timeout;
    (void)callback;
    return absl::UnimplementedError("this transport does not send MULTI/EXEC transactions");
  }

  // Subscribes to `channel`. `on_ready` runs once, on the loop, with OK when
  // the server has confirmed the subscription (messages published after that
  // are delivered) or with the failure. While the connection is down messages
  // are lost; implementations resubscribe after reconnecting. Several
  // subscriptions to one channel are allowed; each gets every message.
  virtual absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) = 0;

  // Names the command connection a command sent now goes out on: nonzero
  // while a connection is up, a new value for every new connection (never
  // reused), 0 while there is none or when the implementation does not
  // tell (the default). A server restart always breaks the connection, so
  // a command sent, and answered, while this stayed the same nonzero value
  // reached the same server process as every other such command. RedLock
  // uses it to check a server's run_id once per connection instead of once
  // per command. Only meaningful for a direct connection: behind a proxy,
  // the server can restart under an unbroken connection.
  virtual uint64_t connection_epoch() const { return 0; }

  // True when this transport routes commands over a Redis Cluster (by the
  // slot of each command's first key). The lock policies then keep one
  // data-set marker per slot (see //lock:keys). Default: false.
  virtual bool cluster() const { return false; }

  // ---- Connection lifecycle ----------------------------------------------
  // What owners that do not know the concrete transport (BlockingClient)
  // need: learn when it is up, drain it, close it. The defaults suit a
  // transport without a connection of its own (e.g. one that forwards to
  // another transport, whose owner closes that one).

  // Learns when the transport can carry commands. `callback` runs once, on
  // the loop, never inside this call: OK when the connection is ready, or
  // why it is not (kUnavailable), or kCancelled by Close(). Returns non-OK
  // (the callback then never runs) after Close() (kCancelled) or when the
  // request cannot be made. Starts a connection attempt if none is under
  // way. Default: sends PING (bounded by `kDefaultConnectProbeTimeout`) and
  // reports OK on any non-error reply, kUnavailable on an error reply, or
  // the Send failure.
  static constexpr absl::Duration kDefaultConnectProbeTimeout = absl::Seconds(5);
  virtual absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback);

  // Fails every pending command and callback with kCancelled, synchronously,
  // and disconnects; no callback of this transport runs after it returns,
  // and later calls are rejected with kCancelled. Idempotent. Default: does
  // nothing (nothing of its own to close).
  virtual void Close() {}

  // True while a command sent now goes out on a ready connection. Default:
  // true (the transport does not track a connection).
  virtual bool connected() const { return true; }

  // Commands sent and not yet answered, failed or timed out. Default: 0
  // (the transport does not tell; owners then cannot wait for it to drain).
  virtual size_t pending_commands() const { return 0; }
};

inline absl::Status Transport::SendScript(absl::string_view body,
                                         absl::Span<const absl::string_view> evalsha_argv,
                                         absl::Duration timeout, ReplyCallback callback) {
  if (evalsha_argv.size() < 3) {
    return absl::InvalidArgumentError("a script command needs EVALSHA, sha1 and numkeys");
  }
  absl::InlinedVector<absl::string_view, 16> eval(evalsha_argv.begin(), evalsha_argv.end());
  eval[0] = "EVAL";
  eval[1] = body;
  return SendArgv(eval, timeout, std::move(callback));
}

// The rejection every SendTransaction shares for its arguments: OK, or
// kInvalidArgument for no commands, an empty command, a command that would
// end or nest the transaction (MULTI, EXEC, DISCARD, WATCH, UNWATCH) or
// change the connection's protocol (the (P|S)(UN)SUBSCRIBE family,
// MONITOR), or a non-positive timeout.
inline absl::Status ValidateTransaction(
    absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout) {
  if (commands.empty()) return absl::InvalidArgumentError("a transaction needs a command");
  for (absl::Span<const absl::string_view> c : commands) {
    if (c.empty()) return absl::InvalidArgumentError("a transaction's command is empty");
    for (absl::string_view refused : {"MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "SUBSCRIBE",
                                      "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE",
                                      "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR"}) {
      if (c[0].size() == refused.size() &&
          std::equal(c[0].begin(), c[0].end(), refused.begin(),
                     [](char a, char b) { return (a & ~0x20) == b; })) {
        return absl::InvalidArgumentError(
            "a transaction's command cannot end or nest it (MULTI, EXEC, DISCARD, WATCH, "
            "UNWATCH) nor change the connection's protocol (SUBSCRIBE, MONITOR, ...)");
      }
    }
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  return absl::OkStatus();
}

// The kUnavailable message of a script that did not run because the
// server's script cache was flushed under its connection and something had
// been sent after it (see the order rule above).
inline constexpr absl::string_view kScriptCacheFlushedMessage =
    "the script did not run: the server's script cache was flushed under the "
    "connection after it was loaded, and a later command had already been sent, so it "
    "was not re-sent out of order (SCRIPT FLUSH, or Redis evicting scripts)";

inline absl::Status Transport::Connect(
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  return Send({"PING"}, kDefaultConnectProbeTimeout,
              [callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
                if (!reply.ok()) {
                  std::move(callback)(reply.status());
                } else if (reply->type == Reply::Type::kError) {
                  std::move(callback)(absl::UnavailableError(reply->str));
                } else {
                  std::move(callback)(absl::OkStatus());
                }
              });
}

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_TRANSPORT_H_
