// This header defines `ReconnectingTransport`, what HiredisTransport and
// TlsTransport are apart from their byte stream: the Transport over a
// command connection and a pub/sub connection (ReconnectingConnection each),
// the commands (CommandLedger), the channels (PubSubChannels) and the
// Connect callbacks (ConnectWaiters). A subclass supplies one thing,
// OpenLink: the RedisLink of one connection attempt (hiredis's async
// context, or TLS over a libuv socket). The contract -- states, deadlines,
// pipelining, pub/sub, Close -- is in hiredis_transport.h.
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_TRANSPORT_UV_RECONNECTING_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_RECONNECTING_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/command_ledger.h"
#include "dlock/transport/uv/connect_waiters.h"
#include "dlock/transport/uv/connection_options.h"
#include "dlock/transport/uv/pubsub_channels.h"
#include "dlock/transport/uv/reconnect_backoff.h"
#include "dlock/transport/uv/reconnecting_connection.h"
#include "dlock/transport/uv/redis_link.h"
#include "dlock/transport/uv/uv_event_loop.h"

struct uv_loop_s;

namespace dlock {

using TransactionCommands = absl::Span<const absl::Span<const absl::string_view>>;

class ReconnectingTransport : public Transport, private ConnectionOwner {
 public:
  ReconnectingTransport(const ReconnectingTransport&) = delete;
  ReconnectingTransport& operator=(const ReconnectingTransport&) = delete;
  // Runs Close().
  ~ReconnectingTransport() override;

  // See Transport::Send and hiredis_transport.h.
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // See Transport::SendArgv: the views go straight to the link when
  // connected (copied only while waiting).
  absl::Status SendArgv(absl::Span<const absl::string_view> argv,
                        absl::Duration timeout, ReplyCallback callback) override;
  // See Transport::SendScript: a script not yet loaded on the current
  // connection goes out as SCRIPT LOAD + EVALSHA, back to back; one that
  // waits for a connection keeps the caller's views (no copy) and is loaded
  // on the connection it goes out on (reconnecting_connection.h).
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  // See Transport::SendTransaction and reconnecting_connection.h (copied
  // while waiting for a connection).
  absl::Status SendTransaction(TransactionCommands commands, absl::Duration timeout,
                               ReplyCallback callback) override;
  // See Transport::Subscribe. kInvalidArgument for a null on_message,
  // kCancelled after Close().
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  // Counts the command connections that became ready (1 for the first); 0
  // while none is ready or after Close().
  uint64_t connection_epoch() const override;
  // Learns when the command connection is up: `callback` runs once, on the
  // loop, never inside this call: OK when ready, the failure of the current
  // attempt (kUnavailable), or kCancelled by Close(). In backoff it starts
  // an attempt at once. Returns kCancelled after Close().
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  // Fails everything pending with kCancelled, inside the call, and
  // disconnects. Idempotent.
  void Close() override;
  // True while the command connection is ready.
  bool connected() const override;
  // The failure of the last connection attempt or lost connection (OK if
  // none yet, and once connected again).
  absl::Status last_error() const;
  // Commands sent and not yet answered or timed out (tests, metrics).
  size_t pending_commands() const override;
  // The transport's clock and timers (the same monotonic clock as any
  // UvEventLoop).
  EventLoop& event_loop() { return timers_; }

 protected:
  // `loop` must outlive the transport; `options` are valid
  // (ValidateConnectionOptions). `ping_on_setup`: end every attempt with a
  // PING round trip. Ignores SIGPIPE if it is at its default disposition.
  ReconnectingTransport(uv_loop_s* loop, const HiredisTransportOptions& options,
                        bool ping_on_setup);
  // Starts the first attempt of the command connection (Create calls it).
  void Start() { cmd_.StartAttempt(); }

  uv_loop_s* loop() const { return loop_; }
  const HiredisTransportOptions& options() const { return options_; }
  EventLoop& timers() { return timers_; }
  // "host:port", or the unix socket's path.
  const std::string& endpoint() const { return endpoint_; }

  // ConnectionOwner::OpenLink: the subclass's byte stream.
  absl::StatusOr<std::unique_ptr<RedisLink>> OpenLink(const std::string& address,
                                                      LinkEvents* events) override = 0;

 private:
  // ConnectionOwner.
  void OnConnectionReady(ReconnectingConnection& conn) override;
  bool OnConnectionDown(ReconnectingConnection& conn, const absl::Status& why,
                        bool was_ready) override;
  void OnPush(Reply reply) override { pubsub_.OnPush(std::move(reply)); }

  // Send and SendArgv: `owned` (may be null) holds the same argv as
  // `argv`, to be moved instead of copied while waiting for a connection.
  // SendScript: `script_body` is set (and `argv` kept by the caller).
  // SendTransaction: `tx` is set (`argv` is EXEC).
  absl::Status Submit(absl::Span<const absl::string_view> argv,
                      std::vector<std::string>* owned, absl::Duration timeout,
                      ReplyCallback callback, const absl::string_view* script_body = nullptr,
                      const TransactionCommands* tx = nullptr);

  uv_loop_s* const loop_;
  const HiredisTransportOptions options_;
  const std::string endpoint_;
  UvEventLoop timers_;
  ReconnectBackoff backoff_{options_.reconnect_backoff_min, options_.reconnect_backoff_max,
                            options_.reconnect_jitter};
  CommandLedger ledger_{loop_, &timers_, &endpoint_};
  ReconnectingConnection cmd_;
  ReconnectingConnection sub_;
  PubSubChannels pubsub_{&sub_, &ledger_, &endpoint_};
  ConnectWaiters waiters_{&ledger_};
  bool closed_ = false;
  // How many times the command connection became ready.
  uint64_t epoch_ = 0;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_RECONNECTING_TRANSPORT_H_
