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
// Not thread-safe: call only on the thread running the loop (from other
// threads, go through a LoopThread, see uv_loop_thread.h).
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/subscriber_set.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/command_deadlines.h"
#include "dlock/transport/uv/deferred_queue.h"
#include "dlock/transport/uv/reconnect_backoff.h"
#include "dlock/transport/uv/uv_event_loop.h"

struct uv_loop_s;
struct uv_timer_s;

namespace dlock {

struct HiredisTransportOptions {
  // TCP endpoint: a host name or an IPv4/IPv6 literal, and a port. A name
  // is resolved on every attempt (uv_getaddrinfo); its first IPv4 address
  // is used, else its first address.
  std::string host = "127.0.0.1";
  int port = 6379;
  // When non-empty, connect to this unix socket instead of host:port.
  std::string unix_socket;

  // When non-empty, `AUTH password` (or `AUTH username password` when
  // `username` is non-empty: a Redis 6+ ACL user) runs first on every
  // connection. A username without a password is an invalid option.
  std::string username;
  std::string password;

  // When not 0, `SELECT db` runs on every command connection.
  int db = 0;

  // Bound on one connection attempt (resolve, connect, AUTH, SELECT).
  absl::Duration connect_timeout = absl::Seconds(5);

  // Reconnect backoff after failed attempts (see the header comment).
  absl::Duration reconnect_backoff_min = absl::Milliseconds(100);
  absl::Duration reconnect_backoff_max = absl::Seconds(5);
  // Fraction of the backoff that is randomized, in [0, 1].
  double reconnect_jitter = 0.5;
};

// Checks the connection options shared by HiredisTransport and TlsTransport
// (address, credentials, db, timeouts, backoff): kInvalidArgument naming the
// first bad field. Both transports' Create call it.
absl::Status ValidateConnectionOptions(const HiredisTransportOptions& options);

// Checks one Send's arguments the same way for HiredisTransport and
// TlsTransport: a non-empty command that does not change the connection's
// protocol (SUBSCRIBE & co., MONITOR: use Subscribe), a positive timeout, a
// callback. kInvalidArgument naming what is wrong.
absl::Status ValidateSendArguments(size_t argc, absl::string_view command,
                                   absl::Duration timeout, bool has_callback);
inline absl::Status ValidateSendArguments(const std::vector<std::string>& argv,
                                          absl::Duration timeout, bool has_callback) {
  return ValidateSendArguments(argv.size(),
                               argv.empty() ? absl::string_view() : argv[0],
                               timeout, has_callback);
}

class HiredisTransport : public Transport {
 public:
  // Validates `options` (kInvalidArgument: empty host, port outside
  // 1..65535, username without password, db < 0, non-positive timeouts,
  // backoff_min > backoff_max, jitter outside [0, 1]) and starts the first
  // connection attempt on `loop`, which must outlive the transport.
  static absl::StatusOr<std::unique_ptr<HiredisTransport>> Create(
      uv_loop_s* loop, HiredisTransportOptions options);

  HiredisTransport(const HiredisTransport&) = delete;
  HiredisTransport& operator=(const HiredisTransport&) = delete;
  // Runs Close().
  ~HiredisTransport() override;

  // See Transport::Send and the table above.
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // See Transport::SendArgv: formats the views straight into hiredis's
  // output buffer when connected (copies them only while waiting).
  absl::Status SendArgv(absl::Span<const absl::string_view> argv,
                        absl::Duration timeout, ReplyCallback callback) override;

  // See Transport::Subscribe and the pub/sub paragraph above. Returns
  // kInvalidArgument for a null on_message, kCancelled after Close().
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;

  // See Transport::connection_epoch: counts the command connections that
  // became ready (1 for the first); 0 while none is ready or after Close().
  uint64_t connection_epoch() const override;

  // Learns when the command connection is up. `callback` runs once, on the
  // loop, never inside this call: OK when the connection is ready (on the
  // next turn if it already is), or the failure of the current attempt
  // (kUnavailable), or kCancelled by Close(). In the backoff state it starts
  // an attempt at once instead of waiting out the delay. Returns kCancelled
  // after Close() (the callback then never runs).
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;

  // Fails everything pending with kCancelled and disconnects (see above).
  // Idempotent.
  void Close() override;

  // True while the command connection is ready.
  bool connected() const override;
  // The failure of the last connection attempt or lost connection (OK if
  // none yet).
  absl::Status last_error() const;
  // Commands sent and not yet answered or timed out (tests, metrics).
  size_t pending_commands() const override;

  // The transport's clock and timers (the same monotonic clock as any
  // UvEventLoop).
  EventLoop& event_loop() { return timers_; }

 private:
  struct Request;
  struct Link;
  struct Conn;
  struct Channel;
  // A FIFO of owned Requests linked through Request::next (no allocation
  // per entry). Defined in hiredis_transport_internal.h.
  class RequestQueue {
   public:
    RequestQueue() = default;
    RequestQueue(const RequestQueue&) = delete;
    RequestQueue& operator=(const RequestQueue&) = delete;
    ~RequestQueue();
    bool empty() const { return head_ == nullptr; }
    void push_back(std::unique_ptr<Request> r);
    std::unique_ptr<Request> pop_front();
    void swap(RequestQueue& other);

   private:
    Request* head_ = nullptr;
    Request* tail_ = nullptr;
  };
  // One deferred delivery (on a later loop turn, by a zero-delay timer): a
  // command's failure, a subscriber's on_ready, or anything else (`fn`,
  // told whether it is being cancelled by Close). Replies do not come
  // through here (see `ready_`).
  struct Event {
    std::unique_ptr<Request> request;
    uint64_t ready_for = 0;
    absl::Status ready_status;
    absl::AnyInvocable<void(bool cancelled) &&> fn;
  };

  HiredisTransport(uv_loop_s* loop, HiredisTransportOptions options);

  // Connection management (hiredis_connection.cc).
  void StartAttempt(Conn& conn);
  void ConnectResolved(Conn& conn, const std::string& ip);
  void ScheduleAttempt(Conn& conn, absl::Duration delay);
  void Teardown(Conn& conn, const absl::Status& why);
  void AttemptFailed(Conn& conn, absl::Status why);
  void ConnectionLost(Conn& conn, absl::Status why);
  void OnTcpConnected(Link* link);
  void OnReady(Conn& conn);
  void OnDisconnected(Link* link, absl::Status why);
  std::string Endpoint() const;

  // Commands (hiredis_transport.cc).
  // Send and SendArgv: `owned` (may be null) holds the same argv as
  // `argv`, to be moved instead of copied while waiting for a connection.
  absl::Status Submit(absl::Span<const absl::string_view> argv,
                      std::vector<std::string>* owned, absl::Duration timeout,
                      ReplyCallback callback);
  void Issue(Link* link, std::unique_ptr<Request> request,
             absl::Span<const absl::string_view> argv);
  void Issue(Link* link, std::unique_ptr<Request> request,
             const std::vector<std::string>& argv);
  // hiredis's reply callback: a reply is parked in `ready_` and delivered
  // by DeliverReplies right after hiredis's read returns.
  void OnReply(Link* link, void* reply);
  // The glue's after_io hook (outside every hiredis callback).
  static void AfterIo(void* self);
  void DeliverReplies();
  // A command's deadline passed (see `deadlines_`).
  void OnDeadline(Request* request);

  // Failures and notifications go through `events_`, delivered on a later
  // loop turn, outside any hiredis callback.
  static Event FnEvent(absl::AnyInvocable<void(bool cancelled) &&> fn);
  void Complete(std::unique_ptr<Request> request, absl::StatusOr<Reply> result);
  // Delivers one event of `events_` (on a later loop turn).
  void Deliver(Event&& event);

  // Pub/sub (hiredis_pubsub.cc).
  void OnPubSubMessage(Link* link, void* reply);
  void SendSubscribe(const std::string& channel, bool subscribe);
  void Unsubscribe(uint64_t subscriber_id);
  void FailPendingReady(const absl::Status& why);
  void FireReady(uint64_t subscriber_id, absl::Status status);

  uv_loop_s* const loop_;
  const HiredisTransportOptions options_;
  UvEventLoop timers_;
  std::unique_ptr<Conn> cmd_;
  std::unique_ptr<Conn> sub_;
  bool closed_ = false;
  // Commands waiting for the command connection (state connecting).
  RequestQueue waiting_;
  // Answered commands, delivered by DeliverReplies in the same loop turn.
  RequestQueue ready_;
  // Deferred failures and notifications (see Event).
  DeferredQueue<Event> events_;
  // Per-command deadlines: one libuv timer for all (command_deadlines.h).
  CommandDeadlines deadlines_;
  // Set while a loop delivering user callbacks runs; the destructor sets
  // *gone_ so that loop stops touching members.
  bool* gone_ = nullptr;
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> connect_waiters_;
  size_t pending_ = 0;
  // How many times the command connection became ready.
  uint64_t cmd_epoch_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Channel>> channels_;
  // Who subscribed with which callbacks (subscriber_set.h).
  SubscriberSet subscribers_{[this](uint64_t id) { Unsubscribe(id); }};
  ReconnectBackoff backoff_{options_.reconnect_backoff_min, options_.reconnect_backoff_max,
                            options_.reconnect_jitter};
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_H_
