// This header defines `TlsTransport`, the `Transport` for servers reached
// over TLS (`rediss://`): libuv TCP streams, OpenSSL through memory BIOs
// (libuv owns the socket, the loop never blocks in OpenSSL), hiredis's RESP
// reader and command formatter (hiredis parses and formats; this transport
// owns the bytes). Debian's hiredis 0.14 has no TLS of its own.
//
// It keeps HiredisTransport's contract and behaviour (hiredis_transport.h),
// which this header does not repeat: the same states (connecting, ready,
// backoff, closed), per-command deadlines, pipelining (commands sent in one
// loop turn go out in one TLS write), reconnect with capped, jittered
// backoff, AUTH [user] password and SELECT on every connection, pub/sub on a
// second connection with resubscribe after reconnect, Connect/Close/
// connected/last_error, Close() failing everything with kCancelled inside
// the call, and a loop that uv_loop_close()s with 0 once it has run again.
// Options are HiredisTransportOptions (`connection`; unix_socket must be
// empty) plus TlsOptions (tls_options.h).
//
// Differences:
//   - An attempt also covers the TLS handshake and ends with a round trip
//     (the AUTH/SELECT replies, else PING), so a server that rejects the
//     client after the handshake (TLS 1.3 mutual TLS without a client
//     certificate) fails the attempt instead of the first command.
//   - Every attempt failure names its reason (kUnavailable; in the text):
//       "certificate verify failed: unknown CA ..."      chain not trusted
//       "certificate verify failed: ... does not match"  wrong host name
//       "certificate verify failed: certificate has expired"
//       "TLS handshake ... timed out"                      connect_timeout
//       "server answered in plain text ... not a TLS port" plain Redis port
//       "... requires a client certificate"                mutual TLS
//     Bad files (CA, certificate, key) are kInvalidArgument from Create.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_

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
#include "dlock/transport/subscriber_set.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/deferred_queue.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/reconnect_backoff.h"
#include "dlock/transport/uv/tls_options.h"
#include "dlock/transport/uv/uv_event_loop.h"

struct uv_loop_s;
struct ssl_ctx_st;

namespace dlock {

struct TlsTransportOptions {
  // Endpoint, AUTH, SELECT, timeouts and backoff (unix_socket must be empty).
  HiredisTransportOptions connection;
  TlsOptions tls;
};

class TlsTransport : public Transport {
 public:
  // Validates the options as HiredisTransport::Create does, loads the CA
  // and client certificate files (kInvalidArgument naming the file and
  // OpenSSL's reason), and starts the first connection attempt.
  static absl::StatusOr<std::unique_ptr<TlsTransport>> Create(
      uv_loop_s* loop, TlsTransportOptions options);

  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;
  ~TlsTransport() override;  // runs Close()

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  uint64_t connection_epoch() const override;

  // As HiredisTransport's.
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  void Close() override;
  bool connected() const override;
  absl::Status last_error() const;
  size_t pending_commands() const override { return pending_; }
  EventLoop& event_loop() { return timers_; }

 private:
  struct Request;
  struct Link;
  struct Conn;
  struct Channel;
  friend struct Link;

  TlsTransport(uv_loop_s* loop, TlsTransportOptions options, ssl_ctx_st* ctx);

  // Connection management.
  void StartAttempt(Conn& conn);
  void OnResolved(Conn& conn, int status, const std::string& ip);
  void OnTcpConnected(Conn& conn, int status);
  void OnHandshakeDone(Conn& conn);
  void OnReady(Conn& conn);
  void AttemptFailed(Conn& conn, absl::Status why);
  void ConnectionLost(Conn& conn, absl::Status why);
  void Teardown(Conn& conn);
  void ScheduleAttempt(Conn& conn, absl::Duration delay);
  std::string Endpoint() const;

  // Bytes.
  void OnRead(Conn& conn, const char* data, size_t len);
  void OnEof(Conn& conn, int status);
  void DriveHandshake(Conn& conn);
  void ReadPlaintext(Conn& conn);
  void OnReply(Conn& conn, Reply reply);
  void OnPubSubReply(Conn& conn, Reply reply);
  void Write(Conn& conn, std::string plain);
  void FlushSoon(Conn& conn);
  void Flush(Conn& conn);
  void FlushCipher(Conn& conn);

  // Commands and events.
  void Issue(std::unique_ptr<Request> request);
  void OnDeadline(Request* request);
  void Complete(std::unique_ptr<Request> request, absl::StatusOr<Reply> result);

  // Pub/sub.
  void SendSubscribe(const std::string& channel, bool subscribe);
  void Unsubscribe(uint64_t subscriber_id);
  void FireReady(uint64_t subscriber_id, absl::Status status);

  uv_loop_s* const loop_;
  const TlsTransportOptions options_;
  ssl_ctx_st* ctx_;
  UvEventLoop timers_;
  std::unique_ptr<Conn> cmd_;
  std::unique_ptr<Conn> sub_;
  bool closed_ = false;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> connect_waiters_;
  // Deferred callbacks, told whether Close is cancelling them.
  using Event = absl::AnyInvocable<void(bool cancelled) &&>;
  DeferredQueue<Event> events_;
  size_t pending_ = 0;
  uint64_t cmd_epoch_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Channel>> channels_;
  // Who subscribed with which callbacks (subscriber_set.h).
  SubscriberSet subscribers_{[this](uint64_t id) { Unsubscribe(id); }};
  ReconnectBackoff backoff_{options_.connection.reconnect_backoff_min,
                            options_.connection.reconnect_backoff_max,
                            options_.connection.reconnect_jitter};
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_
