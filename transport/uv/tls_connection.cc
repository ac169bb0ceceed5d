// TlsTransport: the connection state machine of both connections (command
// and pub/sub): resolve, TCP connect, the AUTH/SELECT/PING set-up after the
// handshake, ready, attempt failure and connection loss, backoff and
// reconnect. The TLS set-up and handshake themselves are in tls_session.cc.
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/tls_transport.h"
#include "tls_transport_internal.h"  // private, same directory

namespace dlock {
namespace {

using tls_internal::FormatCommand;

}  // namespace

// ---------------------------------------------------------------------------
// Connection management.

void TlsTransport::StartAttempt(Conn& conn) {
  if (closed_) return;
  if (conn.retry_timer != 0) {
    timers_.Cancel(conn.retry_timer);
    conn.retry_timer = 0;
  }
  conn.state = Conn::State::kConnecting;
  conn.phase = Conn::Phase::kResolve;
  conn.saw_first_byte = false;
  Conn* c = &conn;
  conn.attempt_timer = timers_.RunAfter(options_.connection.connect_timeout, [this, c] {
    c->attempt_timer = 0;
    const std::string limit = absl::FormatDuration(options_.connection.connect_timeout);
    switch (c->phase) {
      case Conn::Phase::kHandshake:
        AttemptFailed(*c, absl::UnavailableError(absl::StrCat(
                              "TLS handshake with ", Endpoint(), " timed out after ",
                              limit, " (is this a TLS port?)")));
        break;
      case Conn::Phase::kSetup:
        AttemptFailed(*c, absl::UnavailableError(absl::StrCat(
                              Endpoint(), ": no answer over TLS within ", limit)));
        break;
      default:
        AttemptFailed(*c, absl::UnavailableError(absl::StrCat(
                              "connect to ", Endpoint(), " timed out after ", limit)));
    }
  });

  const int rc = HostLookup::Start(
      loop_, options_.connection.host,
      [this, c](int status, std::string ip) { OnResolved(*c, status, ip); }, &conn.lookup);
  if (rc != 0) {
    Conn* cp = &conn;
    // Fail on a later turn (StartAttempt may run inside Create or Connect).
    timers_.RunAfter(absl::ZeroDuration(), [this, cp, rc] {
      if (cp->state == Conn::State::kConnecting && cp->phase == Conn::Phase::kResolve) {
        AttemptFailed(*cp, absl::UnavailableError(absl::StrCat(
                               "cannot resolve ", options_.connection.host, ": ",
                               uv_strerror(rc))));
      }
    });
  }
}

void TlsTransport::OnResolved(Conn& conn, int status, const std::string& ip) {
  conn.lookup.reset();
  if (status != 0 || ip.empty()) {
    AttemptFailed(conn, absl::UnavailableError(absl::StrCat(
                            "cannot resolve ", options_.connection.host, ": ",
                            status != 0 ? uv_strerror(status) : "no address")));
    return;
  }
  struct sockaddr_storage addr;
  std::memset(&addr, 0, sizeof(addr));
  if (uv_ip4_addr(ip.c_str(), options_.connection.port,
                  reinterpret_cast<sockaddr_in*>(&addr)) != 0 &&
      uv_ip6_addr(ip.c_str(), options_.connection.port,
                  reinterpret_cast<sockaddr_in6*>(&addr)) != 0) {
    AttemptFailed(conn, absl::UnavailableError(absl::StrCat("bad address ", ip)));
    return;
  }
  conn.phase = Conn::Phase::kTcp;
  auto* link = new Link;
  link->conn = &conn;
  uv_tcp_init(loop_, &link->tcp);
  link->tcp.data = link;
  link->connect_req.data = link;
  conn.link = link;
  int rc = uv_tcp_connect(&link->connect_req, &link->tcp,
                          reinterpret_cast<const sockaddr*>(&addr),
                          [](uv_connect_t* req, int status) {
                            auto* link = static_cast<Link*>(req->data);
                            if (link->conn == nullptr) return;  // abandoned
                            link->conn->owner->OnTcpConnected(*link->conn, status);
                          });
  if (rc != 0) {
    AttemptFailed(conn, absl::UnavailableError(absl::StrCat(
                            "connect to ", Endpoint(), ": ", uv_strerror(rc))));
  }
}

void TlsTransport::OnHandshakeDone(Conn& conn) {
  conn.phase = Conn::Phase::kSetup;
  const HiredisTransportOptions& c = options_.connection;
  std::string setup;
  conn.setup_replies = 0;
  if (!c.password.empty()) {
    setup += c.username.empty() ? FormatCommand({"AUTH", c.password})
                                : FormatCommand({"AUTH", c.username, c.password});
    ++conn.setup_replies;
  }
  if (!conn.pubsub && c.db != 0) {
    setup += FormatCommand({"SELECT", absl::StrCat(c.db)});
    ++conn.setup_replies;
  }
  setup += FormatCommand({"PING"});
  ++conn.setup_replies;
  conn.out_plain = std::move(setup);
  Flush(conn);
}

void TlsTransport::OnReady(Conn& conn) {
  if (conn.attempt_timer != 0) {
    timers_.Cancel(conn.attempt_timer);
    conn.attempt_timer = 0;
  }
  conn.state = Conn::State::kReady;
  conn.ready_at = timers_.Now();
  conn.failures = 0;
  if (!conn.pubsub) {
    ++cmd_epoch_;
    std::deque<std::unique_ptr<Request>> waiting;
    waiting.swap(waiting_);
    for (auto& r : waiting) Issue(std::move(r));
    for (auto& w : connect_waiters_) {
      events_.Push([w = std::move(w)](bool cancelled) mutable {
        std::move(w)(cancelled ? absl::CancelledError("transport closed")
                               : absl::OkStatus());
      });
    }
    connect_waiters_.clear();
  } else {
    for (auto& [name, ch] : channels_) SendSubscribe(name, true);
  }
}

void TlsTransport::Teardown(Conn& conn) {
  for (TimerId* t : {&conn.attempt_timer, &conn.flush_timer, &conn.retry_timer}) {
    if (*t != 0) timers_.Cancel(*t);
    *t = 0;
  }
  conn.lookup.reset();  // abandons a lookup under way
  if (conn.link != nullptr) {
    Link* link = conn.link;
    link->conn = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&link->tcp),
             [](uv_handle_t* h) { delete static_cast<Link*>(h->data); });
    conn.link = nullptr;
  }
  conn.out_plain.clear();
  conn.pending_subscribes.clear();
  conn.setup_replies = 0;
  conn.phase = Conn::Phase::kResolve;
}

void TlsTransport::ScheduleAttempt(Conn& conn, absl::Duration delay) {
  conn.state = Conn::State::kBackoff;
  Conn* c = &conn;
  conn.retry_timer = timers_.RunAfter(delay, [this, c] {
    c->retry_timer = 0;
    StartAttempt(*c);
  });
}

void TlsTransport::AttemptFailed(Conn& conn, absl::Status why) {
  if (closed_) return;
  Teardown(conn);
  conn.last_error = why;
  ++conn.failures;
  if (!conn.pubsub) {
    std::deque<std::unique_ptr<Request>> waiting;
    waiting.swap(waiting_);
    for (auto& r : waiting) Complete(std::move(r), why);
    for (auto& w : connect_waiters_) {
      events_.Push([w = std::move(w), why](bool cancelled) mutable {
        std::move(w)(cancelled ? absl::CancelledError("transport closed") : why);
      });
    }
    connect_waiters_.clear();
  } else {
    for (uint64_t id : subscribers_.AwaitingReady()) FireReady(id, why);
    if (subscribers_.empty()) {
      conn.state = Conn::State::kIdle;
      return;
    }
  }
  ScheduleAttempt(conn, backoff_.Delay(conn.failures));
}

void TlsTransport::ConnectionLost(Conn& conn, absl::Status why) {
  if (closed_) return;
  const bool stable = timers_.Now() - conn.ready_at >= ReconnectBackoff::kStable;
  std::deque<std::unique_ptr<Request>> inflight;
  inflight.swap(conn.inflight);
  Teardown(conn);
  conn.last_error = why;
  for (auto& r : inflight) Complete(std::move(r), why);
  if (conn.pubsub) {
    for (auto& [name, ch] : channels_) ch->confirmed = false;
    for (uint64_t id : subscribers_.AwaitingReady()) FireReady(id, why);
  }
  if (stable) {
    conn.failures = 0;
    StartAttempt(conn);
  } else {
    ++conn.failures;
    ScheduleAttempt(conn, backoff_.Delay(conn.failures));
  }
}

}  // namespace dlock
