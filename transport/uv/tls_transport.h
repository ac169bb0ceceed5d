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
// Everything but the byte stream is ReconnectingTransport's
// (reconnecting_transport.h), shared with HiredisTransport; TlsTransport adds
// the SSL_CTX and a TLS session over a libuv socket as the stream of each
// connection (tls_link.h).
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dlock/transport/uv/connection_options.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/reconnecting_transport.h"
#include "dlock/transport/uv/tls_options.h"

struct uv_loop_s;
struct ssl_ctx_st;

namespace dlock {

struct TlsTransportOptions {
  // Endpoint, AUTH, SELECT, timeouts and backoff (unix_socket must be empty).
  HiredisTransportOptions connection;
  TlsOptions tls;
};

class TlsTransport : public ReconnectingTransport {
 public:
  // Validates the options as HiredisTransport::Create does, loads the CA
  // and client certificate files (kInvalidArgument naming the file and
  // OpenSSL's reason), and starts the first connection attempt.
  static absl::StatusOr<std::unique_ptr<TlsTransport>> Create(
      uv_loop_s* loop, TlsTransportOptions options);

  ~TlsTransport() override;  // runs Close()

 private:
  TlsTransport(uv_loop_s* loop, TlsTransportOptions options, ssl_ctx_st* ctx);
  absl::StatusOr<std::unique_ptr<RedisLink>> OpenLink(const std::string& address,
                                                      LinkEvents* events) override;

  const TlsTransportOptions options_;
  ssl_ctx_st* const ctx_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_TRANSPORT_H_
