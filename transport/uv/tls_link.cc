// TlsLink: see tls_link.h.
#include "tls_link.h"  // private, same directory

#include <hiredis/hiredis.h>
#include <uv.h>

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace tls_internal {

constexpr size_t kReadChunk = 64 * 1024;

// The libuv side, freed by its close callback; `link` is null once the
// link let go of it.
struct TlsLink::Socket {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  TlsLink* link = nullptr;
  char buf[kReadChunk];
};

absl::StatusOr<std::unique_ptr<RedisLink>> TlsLink::Open(const Config& config,
                                                         const std::string& ip,
                                                         LinkEvents* events) {
  const int port = config.options->connection.port;
  struct sockaddr_storage addr;
  std::memset(&addr, 0, sizeof(addr));
  if (uv_ip4_addr(ip.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(ip.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("bad address ", ip));
  }
  std::unique_ptr<TlsLink> link(new TlsLink(config, events));
  auto* s = new Socket;
  s->link = link.get();
  uv_tcp_init(config.loop, &s->tcp);
  s->tcp.data = s;
  s->connect_req.data = s;
  link->socket_ = s;
  const int rc = uv_tcp_connect(&s->connect_req, &s->tcp,
                                reinterpret_cast<const sockaddr*>(&addr),
                                [](uv_connect_t* req, int status) {
                                  auto* s = static_cast<Socket*>(req->data);
                                  if (s->link != nullptr) s->link->OnTcpConnected(status);
                                });
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", *config.endpoint, ": ", uv_strerror(rc)));
  }
  return std::unique_ptr<RedisLink>(std::move(link));
}

TlsLink::~TlsLink() {
  if (flush_timer_ != 0) c_.timers->Cancel(flush_timer_);
  socket_->link = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&socket_->tcp),
           [](uv_handle_t* h) { delete static_cast<Socket*>(h->data); });
}

std::string TlsLink::TimeoutMessage(absl::Duration limit) const {
  const std::string& ep = *c_.endpoint;
  const std::string after = absl::FormatDuration(limit);
  switch (phase_) {
    case Phase::kHandshake:
      return absl::StrCat("TLS handshake with ", ep, " timed out after ", after,
                          " (is this a TLS port?)");
    case Phase::kSetup:
      return absl::StrCat(ep, ": no answer over TLS within ", after);
    case Phase::kTcp:
      break;
  }
  return absl::StrCat("connect to ", ep, " timed out after ", after);
}

void TlsLink::OnTcpConnected(int status) {
  const std::string& ep = *c_.endpoint;
  if (status != 0) {
    Fail(absl::UnavailableError(absl::StrCat("connect to ", ep, ": ", uv_strerror(status))));
    return;
  }
  uv_tcp_nodelay(&socket_->tcp, 1);
  const TlsOptions& tls = c_.options->tls;
  absl::StatusOr<std::unique_ptr<TlsStream>> stream = TlsStream::Create(
      c_.ctx, ep, tls.server_name.empty() ? c_.options->connection.host : tls.server_name,
      tls);
  if (!stream.ok()) {
    Fail(stream.status());
    return;
  }
  stream_ = *std::move(stream);
  phase_ = Phase::kHandshake;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&socket_->tcp),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* s = static_cast<Socket*>(h->data);
        *buf = uv_buf_init(s->buf, sizeof(s->buf));
      },
      [](uv_stream_t* st, ssize_t nread, const uv_buf_t*) {
        auto* s = static_cast<Socket*>(st->data);
        if (s->link == nullptr) return;
        LinkEvents* events = s->link->events_;  // outlives the link
        if (nread > 0) {
          s->link->OnRead(s->buf, static_cast<size_t>(nread));
        } else if (nread < 0) {
          s->link->OnEof(static_cast<int>(nread));
        }
        // Replies read before a failure are still delivered.
        events->AfterLinkIo();
      });
  DriveHandshake();
}

void TlsLink::OnRead(const char* data, size_t len) {
  Socket* s = socket_;
  if (!saw_first_byte_) {
    saw_first_byte_ = true;
    const unsigned char first = static_cast<unsigned char>(data[0]);
    // A TLS record starts with its content type: 20..23.
    if (phase_ == Phase::kHandshake && (first < 20 || first > 23)) {
      Fail(absl::UnavailableError(absl::StrCat(
          "TLS: ", *c_.endpoint,
          " answered in plain text, not TLS: it is not a TLS port (use redis:// for a "
          "plain port)")));
      return;
    }
  }
  stream_->FeedCipher(data, len);
  if (phase_ == Phase::kHandshake) {
    DriveHandshake();
    if (s->link == nullptr || phase_ == Phase::kHandshake) return;
  }
  ReadPlaintext();
}

void TlsLink::OnEof(int status) {
  const std::string& ep = *c_.endpoint;
  if (phase_ == Phase::kHandshake) {
    Fail(absl::UnavailableError(
        absl::StrCat("TLS handshake with ", ep, " failed: the server closed the connection (",
                     uv_strerror(status), ")")));
  } else {
    Fail(absl::UnavailableError(
        absl::StrCat("connection to ", ep, " lost: ", uv_strerror(status))));
  }
}

void TlsLink::DriveHandshake() {
  absl::StatusOr<bool> done = stream_->Handshake();
  if (!FlushCipher()) return;
  if (!done.ok()) {
    Fail(done.status());
  } else if (*done) {
    phase_ = Phase::kSetup;
    events_->OnLinkOpen();
  }
}

void TlsLink::ReadPlaintext() {
  Socket* s = socket_;
  absl::Status read_error = stream_->Decrypt();
  if (read_error.ok() && !FlushCipher()) return;
  for (;;) {
    absl::StatusOr<std::optional<Reply>> next = stream_->NextReply();
    if (!next.ok()) {
      read_error = absl::UnavailableError(absl::StrCat(
          "protocol error from ", *c_.endpoint, ": ", next.status().message()));
      break;
    }
    if (!next->has_value()) break;
    events_->OnLinkReply(std::move(**next));
    if (s->link == nullptr) return;
  }
  if (!read_error.ok()) Fail(read_error);
}

bool TlsLink::Write(absl::Span<const absl::string_view> argv) {
  AppendCommand(argv, &out_plain_);
  if (flush_timer_ == 0) {
    flush_timer_ = c_.timers->RunAfter(absl::ZeroDuration(), [this] {
      flush_timer_ = 0;
      Flush();
    });
  }
  return true;
}

void TlsLink::Flush() {
  if (stream_ == nullptr || out_plain_.empty()) return;
  std::string plain = std::move(out_plain_);
  out_plain_.clear();
  if (absl::Status why = stream_->Encrypt(plain); !why.ok()) {
    Fail(why);
    return;
  }
  FlushCipher();
}

bool TlsLink::FlushCipher() {
  std::string cipher = stream_->TakeCipher();
  if (cipher.empty()) return true;
  struct WriteReq {
    uv_write_t req;
    std::string data;
  };
  auto* w = new WriteReq;
  w->data = std::move(cipher);
  w->req.data = w;
  uv_buf_t buf = uv_buf_init(&w->data[0], static_cast<unsigned int>(w->data.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&socket_->tcp), &buf, 1,
                    [](uv_write_t* req, int) { delete static_cast<WriteReq*>(req->data); });
  if (rc == 0) return true;
  // (A write that fails later also fails the read side, which reports it.)
  delete w;
  Fail(absl::UnavailableError(
      absl::StrCat("write to ", *c_.endpoint, ": ", uv_strerror(rc))));
  return false;
}

}  // namespace tls_internal
}  // namespace dlock
