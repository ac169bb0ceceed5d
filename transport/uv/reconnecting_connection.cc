// ReconnectingConnection and its LinkSession: see reconnecting_connection.h.
#include "dlock/transport/uv/reconnecting_connection.h"

#include <uv.h>

#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace dlock {

// ---------------------------------------------------------------------------
// LinkSession: one link's wire.

void LinkSession::Attach(std::unique_ptr<RedisLink> link) {
  link_ = std::move(link);
  loaded_.clear();  // a new connection: nothing is known loaded on it
  load_error_.reset();
  tx_error_.reset();
  handshake_left_ = 0;
  handshake_failed_ = false;
}

void LinkSession::OnLinkOpen() {
  const HiredisTransportOptions& o = *p_->options;
  std::vector<std::vector<std::string>> handshake;
  if (!o.password.empty()) {
    if (o.username.empty()) {
      handshake.push_back({"AUTH", o.password});
    } else {
      handshake.push_back({"AUTH", o.username, o.password});
    }
  }
  if (!p_->pubsub && o.db != 0) handshake.push_back({"SELECT", absl::StrCat(o.db)});
  if (p_->ping_on_setup) handshake.push_back({"PING"});
  if (handshake.empty()) {
    conn_->OnReady();
    return;
  }
  handshake_left_ = static_cast<int>(handshake.size());
  for (const std::vector<std::string>& argv : handshake) {
    auto r = std::make_unique<CommandRequest>();
    r->internal = true;
    r->internal_name = argv[0] == "AUTH" ? "AUTH" : argv[0] == "SELECT" ? "SELECT" : "PING";
    absl::InlinedVector<absl::string_view, 3> views(argv.begin(), argv.end());
    Issue(std::move(r), views);
  }
}

void LinkSession::Issue(std::unique_ptr<CommandRequest> request,
                        absl::Span<const absl::string_view> argv) {
  if (link_ == nullptr || !link_->Write(argv)) {
    // Only when the link is already going away.
    if (!request->internal) {
      p_->ledger->Complete(std::move(request), absl::UnavailableError(absl::StrCat(
                                                   *p_->endpoint, ": connection closing")));
    }
    return;
  }
  fifo_.push_back(std::move(request));
}

void LinkSession::IssueScript(std::unique_ptr<CommandRequest> request) {
  const absl::Span<const absl::string_view> argv = request->script_argv;
  const absl::string_view sha = argv[1];
  if (!loaded_.contains(sha)) {
    // Written right before the EVALSHA: nothing can come between them.
    const absl::string_view load_argv[] = {"SCRIPT", "LOAD", request->script_body};
    if (link_ == nullptr || !link_->Write(load_argv)) {
      Issue(std::move(request), argv);  // fails it: the link is going away
      return;
    }
    auto load = std::make_unique<CommandRequest>();
    load->internal = true;
    load->internal_name = "SCRIPT LOAD";
    load->script_load = true;
    load->argv.emplace_back(sha);
    fifo_.push_back(std::move(load));
    loaded_.emplace(sha);
  }
  Issue(std::move(request), argv);
}

void LinkSession::IssueTransaction(
    std::unique_ptr<CommandRequest> request,
    absl::Span<const absl::Span<const absl::string_view>> commands) {
  static constexpr absl::string_view kMulti[] = {"MULTI"};
  static constexpr absl::string_view kExec[] = {"EXEC"};
  // Every part goes into the link's output buffer now, in this call:
  // written together, on this link or not at all.
  bool written = link_ != nullptr && link_->Write(kMulti);
  for (size_t i = 0; written && i < commands.size(); ++i) written = link_->Write(commands[i]);
  if (!written) {
    // Only when the link is already going away (its FIFO fails with it).
    p_->ledger->Complete(std::move(request),
                         absl::UnavailableError(absl::StrCat(*p_->endpoint,
                                                             ": connection closing")));
    return;
  }
  auto parts = std::make_unique<CommandRequest>();
  parts->internal = true;
  parts->internal_name = "MULTI";
  parts->tx_skip = commands.size() + 1;
  fifo_.push_back(std::move(parts));
  Issue(std::move(request), kExec);
}

void LinkSession::OnNoScript(std::unique_ptr<CommandRequest> r) {
  if (load_error_.has_value()) {
    // Our own SCRIPT LOAD, right before it, was refused: that is the answer.
    Reply why = *std::move(load_error_);
    load_error_.reset();
    p_->ledger->Answer(std::move(r), std::move(why));
    return;
  }
  // The cache was flushed under the link: nothing is known loaded now.
  loaded_.clear();
  if (!r->done && !r->script_resent && fifo_.empty() && link_ != nullptr) {
    // Nothing was written after the script on this link, and no user
    // callback has run since its reply was read (they run after the read):
    // sending it again now keeps the order.
    r->script_resent = true;
    IssueScript(std::move(r));
    return;
  }
  p_->ledger->Answer(std::move(r), absl::UnavailableError(absl::StrCat(
                                       *p_->endpoint, ": ", kScriptCacheFlushedMessage)));
}

bool LinkSession::WritePush(absl::Span<const absl::string_view> argv) {
  return link_ != nullptr && link_->Write(argv);
}

void LinkSession::OnLinkReply(Reply reply) {
  CommandRequest* front = fifo_.front();
  if (front != nullptr && front->tx_skip != 0) {
    // MULTI's or a queued command's reply; the first error stands for
    // EXEC's (EXECABORT; or EXEC without MULTI: an ACL refused MULTI).
    if (reply.is_error() && !tx_error_.has_value()) tx_error_ = std::move(reply);
    if (--front->tx_skip == 0) fifo_.pop_front();
    return;
  }
  std::unique_ptr<CommandRequest> r = fifo_.pop_front();
  if (r == nullptr) {
    if (p_->pubsub) {
      p_->owner->OnPush(std::move(reply));
    } else {
      conn_->LinkLost(absl::InternalError(
          absl::StrCat(*p_->endpoint, " sent a reply nobody asked for")));
    }
    return;
  }
  if (!r->internal) {
    if (tx_error_.has_value()) {  // this is the EXEC right behind them
      if (reply.is_error()) reply = *std::move(tx_error_);
      tx_error_.reset();
    }
    if (!r->script_argv.empty()) {
      const bool noscript = reply.IsErrorWithPrefix("NOSCRIPT");
      if (noscript) {
        OnNoScript(std::move(r));
        return;
      }
      load_error_.reset();
    }
    // Delivered once the read has returned (AfterLinkIo).
    p_->ledger->Answer(std::move(r), std::move(reply));
    return;
  }
  if (r->script_load) {
    load_error_.reset();
    if (reply.is_error()) {
      loaded_.erase(r->argv.front());
      load_error_ = std::move(reply);
    }
    return;
  }
  if (handshake_failed_) return;
  if (reply.is_error()) {
    handshake_failed_ = true;
    conn_->HandshakeRefused(absl::UnavailableError(absl::StrCat(
        *p_->endpoint, ": ", r->internal_name, " failed: ", reply.str)));
    return;
  }
  if (--handshake_left_ == 0) conn_->OnReady();
}

void LinkSession::OnLinkLost(absl::Status why) { conn_->LinkLost(std::move(why)); }

void LinkSession::Drop(const absl::Status& why) {
  link_.reset();  // never calls back (redis_link.h)
  RequestQueue fifo;
  fifo.swap(fifo_);
  while (!fifo.empty()) {
    std::unique_ptr<CommandRequest> r = fifo.pop_front();
    if (!r->internal) p_->ledger->Complete(std::move(r), why);
  }
}

// ---------------------------------------------------------------------------
// ReconnectingConnection: attempts, backoff, reconnects.

void LinkSession::IssueWaiting(std::unique_ptr<CommandRequest> r) {
  if (!r->script_argv.empty()) {
    IssueScript(std::move(r));  // loaded first: a new connection
    return;
  }
  std::vector<std::string> argv = std::move(r->argv);
  absl::InlinedVector<absl::string_view, 16> views(argv.begin(), argv.end());
  if (r->tx_sizes.empty()) {
    Issue(std::move(r), views);
    return;
  }
  // A transaction: its commands, one after another in `views`.
  std::vector<size_t> sizes = std::move(r->tx_sizes);
  absl::InlinedVector<absl::Span<const absl::string_view>, 4> commands;
  size_t at = 0;
  for (size_t n : sizes) {
    commands.push_back(absl::MakeConstSpan(views).subspan(at, n));
    at += n;
  }
  IssueTransaction(std::move(r), commands);
}

ReconnectingConnection::~ReconnectingConnection() {
  Close(absl::CancelledError("transport closed"));
}

void ReconnectingConnection::ForThisAttempt(absl::Duration delay, TimerId* id,
                                            absl::AnyInvocable<void()> fn) {
  const uint64_t serial = serial_;
  *id = p_.timers->RunAfter(delay, [this, serial, id, fn = std::move(fn)]() mutable {
    *id = 0;
    if (attempt_on_ && serial == serial_) fn();
  });
}

void ReconnectingConnection::ScheduleAttempt(absl::Duration delay) {
  if (attempt_timer_ != 0) p_.timers->Cancel(attempt_timer_);
  attempt_timer_ = p_.timers->RunAfter(delay, [this] {
    attempt_timer_ = 0;
    StartAttempt();
  });
}

void ReconnectingConnection::StartAttempt() {
  if (closed_) return;
  if (attempt_timer_ != 0) {
    p_.timers->Cancel(attempt_timer_);
    attempt_timer_ = 0;
  }
  if (attempt_on_) return;  // an attempt is already under way
  state_ = State::kConnecting;
  attempt_on_ = true;
  ++serial_;
  const absl::Duration limit = p_.options->connect_timeout;
  ForThisAttempt(limit, &connect_timer_, [this, limit] {
    if (state_ != State::kConnecting) return;
    const RedisLink* link = session_.link();
    absl::Status why = absl::UnavailableError(
        link != nullptr ? link->TimeoutMessage(limit)
                        : absl::StrCat(*p_.endpoint, ": connect timed out after ",
                                       absl::FormatDuration(limit)));
    Teardown(why);
    AttemptFailed(why);
  });
  const HiredisTransportOptions& o = *p_.options;
  if (!o.unix_socket.empty() || IsIpLiteral(o.host)) {
    Open(o.host);
    return;
  }
  // Resolve without blocking the loop.
  auto fail = [this](int status) {
    absl::Status why = absl::UnavailableError(
        absl::StrCat(*p_.endpoint, ": cannot resolve host: ",
                     status != 0 ? uv_strerror(status) : "no address"));
    Teardown(why);
    AttemptFailed(why);
  };
  const int rc = HostLookup::Start(
      p_.loop, o.host,
      [this, fail](int status, std::string ip) {
        lookup_.reset();
        if (status != 0 || ip.empty()) {
          fail(status);
        } else {
          Open(ip);
        }
      },
      &lookup_);
  if (rc != 0) fail(rc);
}

void ReconnectingConnection::Open(const std::string& address) {
  absl::StatusOr<std::unique_ptr<RedisLink>> link =
      p_.owner->OpenLink(address, session_.events());
  if (!link.ok()) {
    const absl::Status why = link.status();
    Teardown(why);
    AttemptFailed(why);
    return;
  }
  session_.Attach(*std::move(link));
}

void ReconnectingConnection::HandshakeRefused(absl::Status why) {
  ForThisAttempt(absl::ZeroDuration(), &fail_timer_, [this, why] {
    Teardown(why);
    AttemptFailed(why);
  });
}

void ReconnectingConnection::LinkLost(absl::Status why) {
  const bool was_ready = state_ == State::kReady;
  Teardown(why);
  if (was_ready) {
    ConnectionLost(std::move(why));
  } else {
    AttemptFailed(std::move(why));
  }
}

void ReconnectingConnection::Teardown(const absl::Status& why) {
  attempt_on_ = false;
  lookup_.reset();  // abandons a lookup under way
  session_.Drop(why);
}

void ReconnectingConnection::AttemptFailed(absl::Status why) {
  last_error_ = why;
  ++failures_;
  if (connect_timer_ != 0) {
    p_.timers->Cancel(connect_timer_);
    connect_timer_ = 0;
  }
  if (closed_) return;
  if (!p_.owner->OnConnectionDown(*this, why, /*was_ready=*/false)) {
    state_ = State::kIdle;
    return;
  }
  state_ = State::kBackoff;
  ScheduleAttempt(p_.backoff->Delay(failures_));
}

void ReconnectingConnection::ConnectionLost(absl::Status why) {
  last_error_ = why;
  if (closed_) return;
  if (!p_.owner->OnConnectionDown(*this, why, /*was_ready=*/true)) {
    state_ = State::kIdle;
    return;
  }
  if (p_.timers->Now() - ready_since_ >= ReconnectBackoff::kStable) {
    // It had been up a while: reconnect at once, commands wait for it.
    failures_ = 0;
    state_ = State::kConnecting;
    ScheduleAttempt(absl::ZeroDuration());
  } else {
    // Lost right after connecting (a flapping server, or one that rejects
    // what we send): count it as a failed attempt, so we back off instead
    // of reconnecting in a tight loop.
    ++failures_;
    state_ = State::kBackoff;
    ScheduleAttempt(p_.backoff->Delay(failures_));
  }
}

void ReconnectingConnection::OnReady() {
  if (connect_timer_ != 0) {
    p_.timers->Cancel(connect_timer_);
    connect_timer_ = 0;
  }
  state_ = State::kReady;
  ready_since_ = p_.timers->Now();
  last_error_ = absl::OkStatus();
  p_.owner->OnConnectionReady(*this);
}

void ReconnectingConnection::Close(const absl::Status& why) {
  if (closed_) return;
  closed_ = true;
  for (TimerId* t : {&attempt_timer_, &connect_timer_, &fail_timer_}) {
    if (*t != 0) p_.timers->Cancel(*t);
    *t = 0;
  }
  Teardown(why);
  state_ = State::kIdle;
}

}  // namespace dlock
