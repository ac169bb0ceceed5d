// HiredisTransport: the connection state machine (connecting, ready,
// backoff; name resolution, the AUTH/SELECT handshake, reconnects) and
// Connect(). See hiredis_transport.h for the states.
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/host_lookup.h"
#include "hiredis_transport_internal.h"  // private, same directory
#include "hiredis_uv_glue.h"  // private, same directory

namespace dlock {
std::string HiredisTransport::Endpoint() const {
  if (!options_.unix_socket.empty()) return options_.unix_socket;
  return absl::StrCat(options_.host, ":", options_.port);
}


void HiredisTransport::ScheduleAttempt(Conn& conn, absl::Duration delay) {
  if (conn.attempt_timer != 0) timers_.Cancel(conn.attempt_timer);
  Conn* c = &conn;
  conn.attempt_timer = timers_.RunAfter(delay, [this, c] {
    c->attempt_timer = 0;
    StartAttempt(*c);
  });
}

void HiredisTransport::StartAttempt(Conn& conn) {
  if (closed_) return;
  if (conn.attempt_timer != 0) {
    timers_.Cancel(conn.attempt_timer);
    conn.attempt_timer = 0;
  }
  if (conn.link != nullptr) return;  // an attempt is already under way
  conn.state = Conn::State::kConnecting;
  Link* link = new Link(this, &conn, ++conn.serial);
  conn.link = link;
  Conn* c = &conn;
  const uint64_t serial = link->serial;
  conn.connect_timer = timers_.RunAfter(options_.connect_timeout, [this, c, serial] {
    c->connect_timer = 0;
    if (c->link == nullptr || c->link->serial != serial ||
        c->state != Conn::State::kConnecting) {
      return;
    }
    absl::Status why = absl::UnavailableError(
        absl::StrCat(Endpoint(), ": connect timed out after ",
                     absl::FormatDuration(options_.connect_timeout)));
    Teardown(*c, why);
    AttemptFailed(*c, why);
  });

  if (!options_.unix_socket.empty() || IsIpLiteral(options_.host)) {
    ConnectResolved(conn, options_.host);
    return;
  }
  // Resolve without blocking the loop.
  const int rc = HostLookup::Start(
      loop_, options_.host,
      [this, link](int status, std::string ip) {
        link->lookup.reset();
        Conn& conn = *link->conn;
        if (status != 0 || ip.empty()) {
          absl::Status why = absl::UnavailableError(
              absl::StrCat(Endpoint(), ": cannot resolve host: ",
                           status != 0 ? uv_strerror(status) : "no address"));
          Teardown(conn, why);
          AttemptFailed(conn, why);
          return;
        }
        ConnectResolved(conn, ip);
      },
      &link->lookup);
  if (rc != 0) {
    absl::Status why = absl::UnavailableError(absl::StrCat(
        Endpoint(), ": cannot resolve host: ", uv_strerror(rc)));
    Teardown(conn, why);
    AttemptFailed(conn, why);
  }
}

void HiredisTransport::ConnectResolved(Conn& conn, const std::string& ip) {
  Link* link = conn.link;
  redisAsyncContext* ac = options_.unix_socket.empty()
                              ? redisAsyncConnect(ip.c_str(), options_.port)
                              : redisAsyncConnectUnix(options_.unix_socket.c_str());
  absl::Status why;
  if (ac == nullptr) {
    why = absl::UnavailableError(absl::StrCat(Endpoint(), ": out of memory"));
  } else if (ac->err) {
    why = absl::UnavailableError(
        absl::StrCat(Endpoint(), ": connect failed: ", ac->errstr));
    redisAsyncFree(ac);
  } else if (!uv_glue::Attach(ac, loop_, &HiredisTransport::AfterIo, this)) {
    why = absl::UnavailableError(
        absl::StrCat(Endpoint(), ": cannot watch the socket on the loop"));
    redisAsyncFree(ac);
  }
  if (!why.ok()) {
    Teardown(conn, why);
    AttemptFailed(conn, why);
    return;
  }
  ac->data = link;
  link->ac = ac;
  // The adapter must be attached first: setting the connect callback asks
  // it to watch for writability.
  redisAsyncSetConnectCallback(ac, [](const redisAsyncContext* ac, int status) {
    Link* link = static_cast<Link*>(ac->data);
    HiredisTransport* self = link->owner;
    if (status == REDIS_OK) {
      self->OnTcpConnected(link);
      return;
    }
    // hiredis frees the context after this callback; nothing was sent on it.
    absl::Status why = absl::UnavailableError(absl::StrCat(
        self->Endpoint(), ": connect failed: ", ac->errstr ? ac->errstr : "?"));
    Conn& conn = *link->conn;
    link->ac = nullptr;
    conn.link = nullptr;
    delete link;
    self->AttemptFailed(conn, why);
  });
  redisAsyncSetDisconnectCallback(ac, [](const redisAsyncContext* ac, int) {
    Link* link = static_cast<Link*>(ac->data);
    if (link->tearing_down) return;  // Teardown finishes the job
    HiredisTransport* self = link->owner;
    absl::Status why = absl::UnavailableError(absl::StrCat(
        self->Endpoint(), ": connection lost",
        ac->errstr != nullptr && ac->errstr[0] ? absl::StrCat(": ", ac->errstr) : ""));
    self->OnDisconnected(link, why);
  });
}

void HiredisTransport::OnDisconnected(Link* link, absl::Status why) {
  // hiredis has already called every pending reply callback with NULL (so
  // `fifo` is empty) and frees the context after we return.
  Conn& conn = *link->conn;
  const bool was_ready = conn.state == Conn::State::kReady;
  link->ac = nullptr;
  conn.link = nullptr;
  delete link;
  if (was_ready) {
    ConnectionLost(conn, std::move(why));
  } else {
    AttemptFailed(conn, std::move(why));
  }
}

void HiredisTransport::Teardown(Conn& conn, const absl::Status& why) {
  Link* link = conn.link;
  if (link == nullptr) return;
  conn.link = nullptr;
  link->tearing_down = true;
  link->fail_status = why;
  link->lookup.reset();  // abandons a lookup under way
  if (link->ac != nullptr) {
    redisAsyncContext* ac = link->ac;
    link->ac = nullptr;
    // Runs every pending reply callback with NULL (→ `why`), then frees.
    // Never called from inside a hiredis callback of this context.
    redisAsyncFree(ac);
  }
  delete link;
}

void HiredisTransport::AttemptFailed(Conn& conn, absl::Status why) {
  conn.last_error = why;
  ++conn.failures;
  if (conn.connect_timer != 0) {
    timers_.Cancel(conn.connect_timer);
    conn.connect_timer = 0;
  }
  if (closed_) return;
  if (!conn.pubsub) {
    RequestQueue waiting;
    waiting.swap(waiting_);
    while (!waiting.empty()) Complete(waiting.pop_front(), why);
    for (auto& cb : connect_waiters_) {
      events_.Push(FnEvent([cb = std::move(cb), why](bool cancelled) mutable {
              std::move(cb)(cancelled ? absl::CancelledError("transport closed") : why);
            }));
    }
    connect_waiters_.clear();
  } else {
    FailPendingReady(why);
    if (channels_.empty()) {
      conn.state = Conn::State::kIdle;
      return;
    }
  }
  conn.state = Conn::State::kBackoff;
  ScheduleAttempt(conn, backoff_.Delay(conn.failures));
}

void HiredisTransport::ConnectionLost(Conn& conn, absl::Status why) {
  conn.last_error = why;
  if (closed_) return;
  if (conn.pubsub) {
    FailPendingReady(why);
    for (auto it = channels_.begin(); it != channels_.end();) {
      Channel& ch = *it->second;
      ch.confirmed = ch.sub_sent = ch.unsub_sent = false;
      if (ch.subscribers.empty()) {
        channels_.erase(it++);
      } else {
        ++it;
      }
    }
    if (channels_.empty()) {
      conn.state = Conn::State::kIdle;
      return;
    }
  }
  if (timers_.Now() - conn.ready_since >= ReconnectBackoff::kStable) {
    // It had been up a while: reconnect at once, commands wait for it.
    conn.failures = 0;
    conn.state = Conn::State::kConnecting;
    ScheduleAttempt(conn, absl::ZeroDuration());
  } else {
    // Lost right after connecting (a flapping server, or one that rejects
    // what we send): count it as a failed attempt, so we back off instead
    // of reconnecting in a tight loop.
    ++conn.failures;
    conn.state = Conn::State::kBackoff;
    ScheduleAttempt(conn, backoff_.Delay(conn.failures));
  }
}

void HiredisTransport::OnTcpConnected(Link* link) {
  Conn& conn = *link->conn;
  std::vector<std::vector<std::string>> handshake;
  if (!options_.password.empty()) {
    if (options_.username.empty()) {
      handshake.push_back({"AUTH", options_.password});
    } else {
      handshake.push_back({"AUTH", options_.username, options_.password});
    }
  }
  if (!conn.pubsub && options_.db != 0) {
    handshake.push_back({"SELECT", absl::StrCat(options_.db)});
  }
  if (handshake.empty()) {
    OnReady(conn);
    return;
  }
  link->handshake_left = static_cast<int>(handshake.size());
  for (const auto& argv : handshake) {
    auto r = std::make_unique<Request>();
    r->internal = true;
    r->internal_name = argv[0] == "AUTH" ? "AUTH" : "SELECT";
    Issue(link, std::move(r), argv);
  }
}

void HiredisTransport::OnReady(Conn& conn) {
  if (conn.connect_timer != 0) {
    timers_.Cancel(conn.connect_timer);
    conn.connect_timer = 0;
  }
  conn.state = Conn::State::kReady;
  conn.ready_since = timers_.Now();
  conn.last_error = absl::OkStatus();
  if (!conn.pubsub) {
    ++cmd_epoch_;
    RequestQueue waiting;
    waiting.swap(waiting_);
    while (!waiting.empty()) {
      std::unique_ptr<Request> r = waiting.pop_front();
      if (r->done) continue;  // timed out while waiting
      std::vector<std::string> argv = std::move(r->argv);
      Issue(conn.link, std::move(r), argv);
    }
    for (auto& cb : connect_waiters_) {
      events_.Push(FnEvent([cb = std::move(cb)](bool cancelled) mutable {
              std::move(cb)(cancelled ? absl::CancelledError("transport closed")
                                      : absl::OkStatus());
            }));
    }
    connect_waiters_.clear();
  } else {
    for (auto it = channels_.begin(); it != channels_.end();) {
      Channel& ch = *it->second;
      ch.confirmed = ch.sub_sent = ch.unsub_sent = false;
      if (ch.subscribers.empty()) {
        channels_.erase(it++);
        continue;
      }
      SendSubscribe(it->first, true);
      ++it;
    }
  }
}

absl::Status HiredisTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  switch (cmd_->state) {
    case Conn::State::kReady:
      events_.Push(FnEvent([cb = std::move(callback)](bool cancelled) mutable {
              std::move(cb)(cancelled ? absl::CancelledError("transport closed")
                                      : absl::OkStatus());
            }));
      break;
    case Conn::State::kConnecting:
      connect_waiters_.push_back(std::move(callback));
      break;
    case Conn::State::kIdle:
    case Conn::State::kBackoff:
      connect_waiters_.push_back(std::move(callback));
      StartAttempt(*cmd_);
      break;
  }
  return absl::OkStatus();
}

}  // namespace dlock
