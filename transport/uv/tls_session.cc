// TlsTransport: OpenSSL over memory BIOs on a connected libuv socket. TLS
// set-up (SNI, host/IP verification), the handshake, reading (decrypt, then
// hiredis's RESP reader) and writing (encrypt, then uv_write). Failures are
// named by tls_errors.cc.
#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"
#include "dlock/transport/uv/tls_transport.h"
#include "tls_errors.h"              // private, same directory
#include "tls_transport_internal.h"  // private, same directory

namespace dlock {

namespace {

using tls_internal::OpenSslError;

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return uv_inet_pton(AF_INET, host.c_str(), buf) == 0 ||
         uv_inet_pton(AF_INET6, host.c_str(), buf) == 0;
}

}  // namespace

void TlsTransport::OnTcpConnected(Conn& conn, int status) {
  if (status != 0) {
    AttemptFailed(conn, absl::UnavailableError(absl::StrCat(
                            "connect to ", Endpoint(), ": ", uv_strerror(status))));
    return;
  }
  Link* link = conn.link;
  uv_tcp_nodelay(&link->tcp, 1);
  ERR_clear_error();
  link->ssl = SSL_new(ctx_);
  link->in = BIO_new(BIO_s_mem());
  link->out = BIO_new(BIO_s_mem());
  link->reader = redisReaderCreate();
  if (link->ssl == nullptr || link->in == nullptr || link->out == nullptr ||
      link->reader == nullptr) {
    if (link->ssl == nullptr) {
      BIO_free(link->in);
      BIO_free(link->out);
    }
    link->in = link->out = nullptr;
    AttemptFailed(conn, absl::InternalError(absl::StrCat("TLS set-up: ", OpenSslError())));
    return;
  }
  SSL_set_bio(link->ssl, link->in, link->out);
  SSL_set_connect_state(link->ssl);
  const TlsOptions& tls = options_.tls;
  const std::string& name =
      tls.server_name.empty() ? options_.connection.host : tls.server_name;
  if (!IsIpLiteral(name)) {
    SSL_set_tlsext_host_name(link->ssl, name.c_str());
    if (!tls.insecure_skip_verify) SSL_set1_host(link->ssl, name.c_str());
  } else if (!tls.insecure_skip_verify) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(link->ssl), name.c_str());
  }
  conn.phase = Conn::Phase::kHandshake;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&link->tcp),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* link = static_cast<Link*>(h->data);
        *buf = uv_buf_init(link->buf, sizeof(link->buf));
      },
      [](uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
        auto* link = static_cast<Link*>(s->data);
        if (link->conn == nullptr) return;
        if (nread > 0) {
          link->conn->owner->OnRead(*link->conn, link->buf, static_cast<size_t>(nread));
        } else if (nread < 0) {
          link->conn->owner->OnEof(*link->conn, static_cast<int>(nread));
        }
      });
  DriveHandshake(conn);
}

absl::Status TlsTransport::TlsError(Conn& conn, int ret, absl::string_view during) {
  SSL* ssl = conn.link != nullptr ? conn.link->ssl : nullptr;
  const std::string& name =
      options_.tls.server_name.empty() ? options_.connection.host : options_.tls.server_name;
  return tls_internal::NameTlsFailure(ssl, ret, during, Endpoint(), name, options_.tls);
}

void TlsTransport::OnRead(Conn& conn, const char* data, size_t len) {
  Link* link = conn.link;
  if (!conn.saw_first_byte) {
    conn.saw_first_byte = true;
    const unsigned char first = static_cast<unsigned char>(data[0]);
    // A TLS record starts with its content type: 20..23.
    if (conn.phase == Conn::Phase::kHandshake && (first < 20 || first > 23)) {
      AttemptFailed(conn, absl::UnavailableError(absl::StrCat(
                              "TLS: ", Endpoint(),
                              " answered in plain text, not TLS: it is not a TLS "
                              "port (use redis:// for a plain port)")));
      return;
    }
  }
  BIO_write(link->in, data, static_cast<int>(len));
  if (conn.phase == Conn::Phase::kHandshake) {
    DriveHandshake(conn);
    if (conn.link != link || conn.phase == Conn::Phase::kHandshake) return;
  }
  ReadPlaintext(conn);
}

void TlsTransport::OnEof(Conn& conn, int status) {
  absl::Status why;
  if (conn.phase == Conn::Phase::kHandshake) {
    why = absl::UnavailableError(absl::StrCat(
        "TLS handshake with ", Endpoint(), " failed: the server closed the connection (",
        uv_strerror(status), ")"));
  } else {
    why = absl::UnavailableError(absl::StrCat("connection to ", Endpoint(),
                                              " lost: ", uv_strerror(status)));
  }
  if (conn.state == Conn::State::kReady) {
    ConnectionLost(conn, why);
  } else {
    AttemptFailed(conn, why);
  }
}

void TlsTransport::DriveHandshake(Conn& conn) {
  Link* link = conn.link;
  ERR_clear_error();
  int ret = SSL_do_handshake(link->ssl);
  FlushCipher(conn);
  if (conn.link != link) return;
  if (ret == 1) {
    OnHandshakeDone(conn);
    return;
  }
  int err = SSL_get_error(link->ssl, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
  AttemptFailed(conn, TlsError(conn, ret, "handshake"));
}

void TlsTransport::ReadPlaintext(Conn& conn) {
  Link* link = conn.link;
  char plain[16 * 1024];
  absl::Status read_error;
  for (;;) {
    ERR_clear_error();
    int n = SSL_read(link->ssl, plain, sizeof(plain));
    if (n > 0) {
      redisReaderFeed(link->reader, plain, static_cast<size_t>(n));
      continue;
    }
    int err = SSL_get_error(link->ssl, n);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      read_error = TlsError(conn, n, "read");
    }
    break;
  }
  if (read_error.ok()) {
    FlushCipher(conn);
    if (conn.link != link) return;
  }
  // Replies that arrived before a failure are still delivered.
  for (;;) {
    void* r = nullptr;
    if (redisReaderGetReply(link->reader, &r) != REDIS_OK) {
      read_error = absl::UnavailableError(absl::StrCat(
          "protocol error from ", Endpoint(), ": ", link->reader->errstr));
      break;
    }
    if (r == nullptr) break;
    Reply reply = ReplyFromHiredis(*static_cast<redisReply*>(r));
    freeReplyObject(r);
    if (conn.setup_replies > 0) {
      if (reply.is_error()) {
        AttemptFailed(conn, absl::UnavailableError(
                                absl::StrCat(Endpoint(), ": ", reply.str)));
        return;
      }
      if (--conn.setup_replies == 0) OnReady(conn);
    } else if (conn.pubsub) {
      OnPubSubReply(conn, std::move(reply));
    } else {
      OnReply(conn, std::move(reply));
    }
    if (conn.link != link) return;
  }
  if (!read_error.ok()) {
    if (conn.state == Conn::State::kReady) {
      ConnectionLost(conn, read_error);
    } else {
      AttemptFailed(conn, read_error);
    }
  }
}

// ---------------------------------------------------------------------------
// Bytes out.

void TlsTransport::Write(Conn& conn, std::string plain) {
  conn.out_plain += plain;
  FlushSoon(conn);
}

void TlsTransport::FlushSoon(Conn& conn) {
  if (conn.flush_timer != 0) return;
  Conn* c = &conn;
  conn.flush_timer = timers_.RunAfter(absl::ZeroDuration(), [this, c] {
    c->flush_timer = 0;
    Flush(*c);
  });
}

void TlsTransport::Flush(Conn& conn) {
  Link* link = conn.link;
  if (link == nullptr || link->ssl == nullptr || conn.out_plain.empty()) return;
  ERR_clear_error();
  std::string plain = std::move(conn.out_plain);
  conn.out_plain.clear();
  int n = SSL_write(link->ssl, plain.data(), static_cast<int>(plain.size()));
  if (n <= 0) {
    absl::Status why = TlsError(conn, n, "write");
    if (conn.state == Conn::State::kReady) {
      ConnectionLost(conn, why);
    } else {
      AttemptFailed(conn, why);
    }
    return;
  }
  FlushCipher(conn);
}

void TlsTransport::FlushCipher(Conn& conn) {
  Link* link = conn.link;
  size_t pending = BIO_ctrl_pending(link->out);
  if (pending == 0) return;
  struct WriteReq {
    uv_write_t req;
    std::string data;
  };
  auto* w = new WriteReq;
  w->data.resize(pending);
  int got = BIO_read(link->out, &w->data[0], static_cast<int>(pending));
  if (got <= 0) {
    delete w;
    return;
  }
  w->data.resize(static_cast<size_t>(got));
  w->req.data = w;
  uv_buf_t buf = uv_buf_init(&w->data[0], static_cast<unsigned int>(w->data.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&link->tcp), &buf, 1,
                    [](uv_write_t* req, int) { delete static_cast<WriteReq*>(req->data); });
  if (rc != 0) {
    delete w;
    absl::Status why = absl::UnavailableError(
        absl::StrCat("write to ", Endpoint(), ": ", uv_strerror(rc)));
    if (conn.state == Conn::State::kReady) {
      ConnectionLost(conn, why);
    } else {
      AttemptFailed(conn, why);
    }
  }
  // A failed write also fails the read side (reset/EOF), which reports it.
}

}  // namespace dlock
