// This header defines `HiredisTransport`, the real `Transport`: hiredis's
// async API on a host-owned libuv loop, with per-command deadlines,
// automatic reconnection and pub/sub.
//
// Construction and connection:
//   auto t = HiredisTransport::Create(uv_loop, options);  // starts connecting
//   (*t)->Connect([](absl::Status s) { ... });  // optional: learn when it is up
//   (*t)->Send({"SET", key, value}, absl::Seconds(1), callback);
// `Create` only validates the options and starts the first connection
// attempt; it never blocks (host names are resolved with uv_getaddrinfo).
//
// Connection states and what a command sent in each gets:
//
//   state        | entered when                         | Send(...) gets
//   -------------+--------------------------------------+---------------------------------
//   connecting   | Create; a connection that had been   | waits, up to its own deadline,
//                | ready for 1 s or more was lost (the  | and is sent once the connection
//                | first retry is immediate); a backoff | is ready; kUnavailable if this
//                | delay ended; Connect()               | attempt fails
//   ready        | TCP connected, AUTH and SELECT done  | sent at once
//   backoff      | an attempt failed (refused, unknown  | kUnavailable at once ("fail
//                | host, connect timeout, AUTH refused),| fast", on a later loop turn),
//                | or a connection was lost less than   | with the last error in the text
//                | 1 s after it became ready (flapping) |
//   closed       | Close() or the destructor            | rejected: Send returns kCancelled
//
// An attempt covers name resolution, TCP connect, `AUTH [username] password`
// and `SELECT db`, bounded by `connect_timeout`. After a failed attempt the
// next one starts after a capped exponential backoff with jitter:
// min(backoff_max, backoff_min * 2^(failures-1)) * U[1 - jitter, 1].
// A wrong password is an attempt failure like any other (kUnavailable with
// the server's "WRONGPASS ..." text); retries continue in the background.
//
// Commands:
//   - Replies come back in order (hiredis). Every accepted command's callback
//     runs exactly once, on the loop, never inside Send: a reply in the
//     same loop turn it was read in (after hiredis's read has returned, so
//     the callback may send, close or destroy the transport), a failure on
//     a later turn. It gets the Reply (an
//     error reply such as "ERR ..." or "NOSCRIPT ..." is a Reply of type
//     kError), or kDeadlineExceeded when `timeout` passed first (the command
//     may still run on the server; its late reply is dropped), kUnavailable
//     when the connection was lost or could not be made (the command may
//     have run), kCancelled by Close().
//   - Commands sent in one loop turn go out in one write (pipelining); any
//     number may be in flight.
//   - Scripts (SendScript) keep that order whatever the server's script
//     cache holds: a script goes out as SCRIPT LOAD + EVALSHA the first
//     time on each connection, and a NOSCRIPT under a flushed cache is
//     re-sent only when nothing was written after it, else kUnavailable
//     (reconnecting_connection.h, transport.h).
//   - SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE, PUNSUBSCRIBE and MONITOR change the
//     connection's protocol and are rejected by Send (kInvalidArgument); use
//     Subscribe.
//
// Pub/sub uses a second connection, opened on the first Subscribe, with the
// same options and reconnect policy (no SELECT: channels are global). One
// SUBSCRIBE is sent per channel however many subscriptions it has; each
// subscription gets every message. `on_ready` runs once: OK when the server
// confirmed the channel (at once, on a later turn, when it already had), or
// kUnavailable when the pub/sub connection failed or was lost first, or
// kCancelled by Close(). Either way the subscription stays registered until
// destroyed: after every reconnect its channel is subscribed again, and
// messages published while the connection was down are lost. Destroying a
// Subscription before its on_ready ran destroys on_ready without running it;
// after the destructor returns neither callback runs. on_message may destroy
// its own Subscription (or the transport).
// A channel the (ACL) user may not access makes the server answer SUBSCRIBE
// with an error, on which hiredis 0.14 drops the pub/sub connection: on_ready
// gets kUnavailable (with the NOPERM text) and, as long as such a
// subscription exists, the pub/sub connection keeps backing off and retrying.
//
// Close() (also run by the destructor) fails every pending command, Connect
// waiter and unconfirmed on_ready with kCancelled, synchronously inside
// Close, and frees both connections; no callback runs after it returns.
// Once the loop has run again (to deliver libuv close callbacks) the host
// may uv_loop_close() it with result 0. Until Close, the transport keeps the
// loop alive (socket and retry timer), as any client connection does.
//
// hiredis writes with write(2), so a peer that went away raises SIGPIPE:
// `Create` sets SIGPIPE to SIG_IGN if it is at its default disposition.
//
// Lifetime: the uv loop must outlive the transport. The transport may be
// destroyed inside any of its own callbacks. Subscription handles may
// outlive the transport (then destroying them does nothing).
//
// Everything above is ReconnectingTransport's (reconnecting_transport.h),
// which TlsTransport shares; HiredisTransport adds hiredis's async context as the byte stream of each
// connection (hiredis_link.h).
//
// Not thread-safe: call only on the thread running the loop (from other
// threads, go through a LoopThread, see uv_loop_thread.h).
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dlock/transport/uv/connection_options.h"
#include "dlock/transport/uv/reconnecting_transport.h"

struct uv_loop_s;

namespace dlock {

class HiredisTransport : public ReconnectingTransport {
 public:
  // Validates `options` (kInvalidArgument: empty host, port outside
  // 1..65535, username without password, db < 0, non-positive timeouts,
  // backoff_min > backoff_max, jitter outside [0, 1]) and starts the first
  // connection attempt on `loop`, which must outlive the transport.
  static absl::StatusOr<std::unique_ptr<HiredisTransport>> Create(
      uv_loop_s* loop, HiredisTransportOptions options);

  // Runs Close().
  ~HiredisTransport() override;

 private:
  HiredisTransport(uv_loop_s* loop, const HiredisTransportOptions& options)
      : ReconnectingTransport(loop, options, /*ping_on_setup=*/false) {}
  absl::StatusOr<std::unique_ptr<RedisLink>> OpenLink(const std::string& address,
                                                      LinkEvents* events) override;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_
