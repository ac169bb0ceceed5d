#include "tls_stream.h"  // private, same directory

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"
#include "dlock/transport/uv/host_lookup.h"
#include "tls_errors.h"  // private, same directory

namespace dlock {
namespace tls_internal {
absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Create(SSL_CTX* ctx,
                                                             std::string endpoint,
                                                             std::string name,
                                                             const TlsOptions& tls) {
  std::unique_ptr<TlsStream> s(new TlsStream(std::move(endpoint), std::move(name), tls));
  ERR_clear_error();
  s->ssl_ = SSL_new(ctx);
  s->in_ = BIO_new(BIO_s_mem());
  s->out_ = BIO_new(BIO_s_mem());
  s->reader_ = redisReaderCreate();
  if (s->ssl_ == nullptr || s->in_ == nullptr || s->out_ == nullptr ||
      s->reader_ == nullptr) {
    if (s->ssl_ == nullptr) {
      BIO_free(s->in_);
      BIO_free(s->out_);
    }
    s->in_ = s->out_ = nullptr;
    return absl::InternalError(absl::StrCat("TLS set-up: ", OpenSslError()));
  }
  UseDlockReplies(s->reader_);  // replies built as dlock Replies (hiredis_reply.h)
  SSL_set_bio(s->ssl_, s->in_, s->out_);
  SSL_set_connect_state(s->ssl_);
  const std::string& n = s->name_;
  if (!IsIpLiteral(n)) {
    SSL_set_tlsext_host_name(s->ssl_, n.c_str());
    if (!tls.insecure_skip_verify) SSL_set1_host(s->ssl_, n.c_str());
  } else if (!tls.insecure_skip_verify) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl_), n.c_str());
  }
  return s;
}

TlsStream::~TlsStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees the BIOs
  if (reader_ != nullptr) redisReaderFree(reader_);
}

absl::Status TlsStream::Failure(int ret, const char* during) {
  return NameTlsFailure(ssl_, ret, during, endpoint_, name_, tls_);
}

void TlsStream::FeedCipher(const char* data, size_t len) {
  BIO_write(in_, data, static_cast<int>(len));
}

absl::StatusOr<bool> TlsStream::Handshake() {
  ERR_clear_error();
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) return true;
  const int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return false;
  return Failure(ret, "handshake");
}

absl::Status TlsStream::Decrypt() {
  char plain[16 * 1024];
  for (;;) {
    ERR_clear_error();
    const int n = SSL_read(ssl_, plain, sizeof(plain));
    if (n > 0) {
      redisReaderFeed(reader_, plain, static_cast<size_t>(n));
      continue;
    }
    const int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return absl::OkStatus();
    return Failure(n, "read");
  }
}

absl::StatusOr<std::optional<Reply>> TlsStream::NextReply() {
  void* r = nullptr;
  if (redisReaderGetReply(reader_, &r) != REDIS_OK) {
    return absl::UnavailableError(reader_->errstr);
  }
  if (r == nullptr) return std::optional<Reply>();
  Reply reply = TakeDlockReply(r);
  reader_->fn->freeObject(r);
  return std::optional<Reply>(std::move(reply));
}

absl::Status TlsStream::Encrypt(const std::string& plain) {
  ERR_clear_error();
  const int n = SSL_write(ssl_, plain.data(), static_cast<int>(plain.size()));
  if (n <= 0) return Failure(n, "write");
  return absl::OkStatus();
}

std::string TlsStream::TakeCipher() {
  std::string data;
  const size_t pending = BIO_ctrl_pending(out_);
  if (pending == 0) return data;
  data.resize(pending);
  const int got = BIO_read(out_, &data[0], static_cast<int>(pending));
  data.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return data;
}

}  // namespace tls_internal
}  // namespace dlock
