// Internal to //transport/uv:tls_transport: `TlsStream`, one TLS client
// session in memory, with hiredis's RESP reader on its plaintext side.
// Ciphertext read from the socket goes in (FeedCipher), replies come out
// (Decrypt, NextReply); commands go in (Encrypt) and the ciphertext to write
// to the socket comes out (TakeCipher). It does no I/O and keeps no timers:
// TlsLink moves the bytes (tls_link.cc). Failures come back as
// kUnavailable named by NameTlsFailure (tls_errors.h).
//
// Thread-compatible.
#ifndef DLOCK_TRANSPORT_UV_TLS_STREAM_H_
#define DLOCK_TRANSPORT_UV_TLS_STREAM_H_

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/uv/tls_options.h"

struct redisReader;

namespace dlock {
namespace tls_internal {

class TlsStream {
 public:
  // A client session on `ctx` for the server at `endpoint` whose
  // certificate must carry `name` (SNI for a host name; host or IP check
  // unless tls.insecure_skip_verify). kInternal when OpenSSL cannot set
  // one up.
  static absl::StatusOr<std::unique_ptr<TlsStream>> Create(SSL_CTX* ctx,
                                                           std::string endpoint,
                                                           std::string name,
                                                           const TlsOptions& tls);
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  ~TlsStream();

  // Ciphertext read from the socket.
  void FeedCipher(const char* data, size_t len);
  // Advances the handshake with what was fed: true once it is complete,
  // false while it needs more bytes, or the named failure.
  absl::StatusOr<bool> Handshake();
  // Decrypts everything fed so far into the reply parser. OK, or the named
  // failure (replies decrypted before it can still be taken).
  absl::Status Decrypt();
  // The next complete reply, nullopt when none is complete yet; a protocol
  // error (the reader's text) once the bytes are not RESP.
  absl::StatusOr<std::optional<Reply>> NextReply();
  // Encrypts `plain` (commands). OK, or the named failure.
  absl::Status Encrypt(const std::string& plain);
  // The ciphertext waiting to be written to the socket (may be empty).
  std::string TakeCipher();

 private:
  TlsStream(std::string endpoint, std::string name, const TlsOptions& tls)
      : endpoint_(std::move(endpoint)), name_(std::move(name)), tls_(tls) {}
  absl::Status Failure(int ret, const char* during);

  const std::string endpoint_;
  const std::string name_;
  const TlsOptions tls_;
  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;   // ciphertext from the socket, read by OpenSSL
  BIO* out_ = nullptr;  // ciphertext from OpenSSL, for the socket
  redisReader* reader_ = nullptr;
};

}  // namespace tls_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_STREAM_H_
