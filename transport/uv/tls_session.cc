// TlsTransport: the TLS stream on a connected libuv socket: starting the
// session (TlsStream, tls_stream.cc: OpenSSL over memory BIOs and hiredis's
// RESP reader) once TCP is up, driving the handshake, socket bytes in
// (a plain-text answer is named as such; replies go to the command or
// pub/sub path) and out (uv_write).
#include <uv.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/tls_transport.h"
#include "tls_stream.h"              // private, same directory
#include "tls_transport_internal.h"  // private, same directory

namespace dlock {

void TlsTransport::OnTcpConnected(Conn& conn, int status) {
  if (status != 0) {
    AttemptFailed(conn, absl::UnavailableError(absl::StrCat(
                            "connect to ", Endpoint(), ": ", uv_strerror(status))));
    return;
  }
  Link* link = conn.link;
  uv_tcp_nodelay(&link->tcp, 1);
  const TlsOptions& tls = options_.tls;
  absl::StatusOr<std::unique_ptr<tls_internal::TlsStream>> stream =
      tls_internal::TlsStream::Create(
          ctx_, Endpoint(), tls.server_name.empty() ? options_.connection.host : tls.server_name,
          tls);
  if (!stream.ok()) {
    AttemptFailed(conn, stream.status());
    return;
  }
  link->stream = *std::move(stream);
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
  link->stream->FeedCipher(data, len);
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
  absl::StatusOr<bool> done = link->stream->Handshake();
  FlushCipher(conn);
  if (conn.link != link) return;
  if (!done.ok()) {
    AttemptFailed(conn, done.status());
  } else if (*done) {
    OnHandshakeDone(conn);
  }
}

void TlsTransport::ReadPlaintext(Conn& conn) {
  Link* link = conn.link;
  absl::Status read_error = link->stream->Decrypt();
  if (read_error.ok()) {
    FlushCipher(conn);
    if (conn.link != link) return;
  }
  // Replies that arrived before a failure are still delivered.
  for (;;) {
    absl::StatusOr<std::optional<Reply>> next = link->stream->NextReply();
    if (!next.ok()) {
      read_error = absl::UnavailableError(absl::StrCat(
          "protocol error from ", Endpoint(), ": ", next.status().message()));
      break;
    }
    if (!next->has_value()) break;
    Reply reply = std::move(**next);
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
  if (link == nullptr || link->stream == nullptr || conn.out_plain.empty()) return;
  std::string plain = std::move(conn.out_plain);
  conn.out_plain.clear();
  if (absl::Status why = link->stream->Encrypt(plain); !why.ok()) {
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
  std::string cipher = link->stream->TakeCipher();
  if (cipher.empty()) return;
  struct WriteReq {
    uv_write_t req;
    std::string data;
  };
  auto* w = new WriteReq;
  w->data = std::move(cipher);
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
