// TlsTransport: creation (options, the SSL_CTX with its CA and client
// certificate), the command path (Send, deadlines, replies, the event queue),
// Connect/Close, and pub/sub on the second connection. The connection state
// machine is in tls_connection.cc, OpenSSL and the bytes in tls_session.cc.
#include "dlock/transport/uv/tls_transport.h"

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tls_errors.h"              // private, same directory
#include "tls_transport_internal.h"  // private, same directory

namespace dlock {
namespace {

using tls_internal::FormatCommand;
using tls_internal::OpenSslError;

void IgnoreSigpipeIfDefault() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

namespace tls_internal {

std::string FormatCommand(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  int len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()),
                                   ptrs.data(), lens.data());
  std::string out;
  if (len > 0 && cmd != nullptr) out.assign(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  return out;
}

}  // namespace tls_internal

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TlsTransport>> TlsTransport::Create(
    uv_loop_s* loop, TlsTransportOptions options) {
  const HiredisTransportOptions& c = options.connection;
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (!c.unix_socket.empty()) {
    return absl::InvalidArgumentError("TLS needs host:port, not a unix socket");
  }
  if (absl::Status s = ValidateConnectionOptions(c); !s.ok()) return s;
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS client certificate and key go together (--tls-cert and --tls-key)");
  }

  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("SSL_CTX_new: ", OpenSslError()));
  }
  auto fail = [ctx](absl::string_view what, const std::string& file) {
    std::string why = OpenSslError();
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot load ", what, " \"", file, "\": ", why));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  if (!tls.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!tls.ca_file.empty() || !tls.ca_dir.empty()) {
      if (SSL_CTX_load_verify_locations(
              ctx, tls.ca_file.empty() ? nullptr : tls.ca_file.c_str(),
              tls.ca_dir.empty() ? nullptr : tls.ca_dir.c_str()) != 1) {
        return fail("CA certificates",
                    tls.ca_file.empty() ? tls.ca_dir : tls.ca_file);
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return fail("the system CA store", "default");
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
      return fail("client certificate", tls.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("client key (does it match the certificate?)", tls.key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail("client key (does not match the certificate)", tls.key_file);
    }
  }
  IgnoreSigpipeIfDefault();
  auto t = std::unique_ptr<TlsTransport>(new TlsTransport(loop, std::move(options), ctx));
  t->StartAttempt(*t->cmd_);
  return t;
}

TlsTransport::TlsTransport(uv_loop_s* loop, TlsTransportOptions options, ssl_ctx_st* ctx)
    : loop_(loop),
      options_(std::move(options)),
      ctx_(ctx),
      timers_(loop),
      cmd_(std::make_unique<Conn>(this, false)),
      sub_(std::make_unique<Conn>(this, true)),
      events_(&timers_, [](Event&& fn) { std::move(fn)(false); }) {}

TlsTransport::~TlsTransport() {
  Close();
  SSL_CTX_free(ctx_);
}

std::string TlsTransport::Endpoint() const {
  return absl::StrCat(options_.connection.host, ":", options_.connection.port);
}

// ---------------------------------------------------------------------------
// Commands.

absl::Status TlsTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                                ReplyCallback callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (absl::Status s = ValidateSendArguments(argv, timeout, callback != nullptr); !s.ok()) {
    return s;
  }
  auto r = std::make_unique<Request>();
  r->callback = std::move(callback);
  r->wire = FormatCommand(argv);
  ++pending_;
  Request* raw = r.get();
  r->timer = timers_.RunAfter(timeout, [this, raw] {
    raw->timer = 0;
    OnDeadline(raw);
  });
  switch (cmd_->state) {
    case Conn::State::kReady:
      Issue(std::move(r));
      break;
    case Conn::State::kIdle:
    case Conn::State::kConnecting:
      waiting_.push_back(std::move(r));
      break;
    case Conn::State::kBackoff:
      Complete(std::move(r),
               absl::UnavailableError(absl::StrCat(
                   "not connected (retrying in the background); last error: ",
                   cmd_->last_error.message())));
      break;
  }
  return absl::OkStatus();
}

void TlsTransport::Issue(std::unique_ptr<Request> request) {
  if (!request->callback) return;  // timed out while waiting
  Write(*cmd_, std::move(request->wire));
  request->wire.clear();
  cmd_->inflight.push_back(std::move(request));
}

void TlsTransport::OnDeadline(Request* request) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->get() == request) {
      std::unique_ptr<Request> r = std::move(*it);
      waiting_.erase(it);
      Complete(std::move(r), absl::DeadlineExceededError("no reply within the timeout"));
      return;
    }
  }
  // In flight: answer now; the late reply is dropped (the slot stays so
  // replies keep matching their commands).
  if (!request->callback) return;
  --pending_;
  events_.Push([cb = std::move(request->callback)](bool cancelled) mutable {
    std::move(cb)(cancelled ? absl::CancelledError("transport closed")
                            : absl::DeadlineExceededError("no reply within the timeout"));
  });
  request->callback = nullptr;
}

void TlsTransport::Complete(std::unique_ptr<Request> request,
                            absl::StatusOr<Reply> result) {
  if (request->timer != 0) {
    timers_.Cancel(request->timer);
    request->timer = 0;
  }
  if (!request->callback) return;  // already answered (deadline)
  --pending_;
  events_.Push([cb = std::move(request->callback), result = std::move(result)](
           bool cancelled) mutable {
    if (cancelled) result = absl::CancelledError("transport closed");
    std::move(cb)(std::move(result));
  });
}

void TlsTransport::OnReply(Conn& conn, Reply reply) {
  if (conn.inflight.empty()) {
    ConnectionLost(conn, absl::InternalError(
                             absl::StrCat(Endpoint(), " sent a reply nobody asked for")));
    return;
  }
  std::unique_ptr<Request> r = std::move(conn.inflight.front());
  conn.inflight.pop_front();
  Complete(std::move(r), std::move(reply));
}

absl::Status TlsTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (cmd_->state == Conn::State::kReady) {
    events_.Push([cb = std::move(callback)](bool cancelled) mutable {
      std::move(cb)(cancelled ? absl::CancelledError("transport closed")
                              : absl::OkStatus());
    });
    return absl::OkStatus();
  }
  connect_waiters_.push_back(std::move(callback));
  if (cmd_->state == Conn::State::kBackoff || cmd_->state == Conn::State::kIdle) {
    StartAttempt(*cmd_);
  }
  return absl::OkStatus();
}

void TlsTransport::Close() {
  if (closed_) return;
  closed_ = true;
  events_.Stop();  // what Close queues is delivered below, inside Close
  std::weak_ptr<int> alive = life_;
  const absl::Status cancelled = absl::CancelledError("transport closed");
  for (Conn* c : {cmd_.get(), sub_.get()}) {
    std::deque<std::unique_ptr<Request>> inflight;
    inflight.swap(c->inflight);
    Teardown(*c);
    c->state = Conn::State::kIdle;
    for (auto& r : inflight) Complete(std::move(r), cancelled);
  }
  std::deque<std::unique_ptr<Request>> waiting;
  waiting.swap(waiting_);
  for (auto& r : waiting) Complete(std::move(r), cancelled);
  for (auto& w : connect_waiters_) {
    events_.Push([w = std::move(w), cancelled](bool) mutable { std::move(w)(cancelled); });
  }
  connect_waiters_.clear();
  for (SubscriberSet::ReadyCallback& cb : subscribers_.TakeAllReady()) {
    events_.Push([cb = std::move(cb), cancelled](bool) mutable { std::move(cb)(cancelled); });
  }
  // Deliver everything now, inside Close.
  Event fn;
  while (events_.PopFront(&fn)) {
    std::move(fn)(true);
    if (alive.expired()) return;
  }
}

bool TlsTransport::connected() const {
  return !closed_ && cmd_->state == Conn::State::kReady;
}

absl::Status TlsTransport::last_error() const { return cmd_->last_error; }

uint64_t TlsTransport::connection_epoch() const { return connected() ? cmd_epoch_ : 0; }

// ---------------------------------------------------------------------------
// Pub/sub.

absl::StatusOr<std::unique_ptr<Subscription>> TlsTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      subscribers_.Add(channel, std::move(on_message), std::move(on_ready), &id);
  std::unique_ptr<Channel>& ch = channels_[channel];
  const bool fresh = ch == nullptr;
  if (fresh) ch = std::make_unique<Channel>();
  ch->subscribers.push_back(id);
  switch (sub_->state) {
    case Conn::State::kReady:
      if (ch->confirmed) {
        FireReady(id, absl::OkStatus());
      } else if (fresh) {
        SendSubscribe(channel, true);
      }
      break;
    case Conn::State::kIdle:
      StartAttempt(*sub_);
      break;
    case Conn::State::kConnecting:
      break;
    case Conn::State::kBackoff:
      FireReady(id, absl::UnavailableError(absl::StrCat(
                        "pub/sub connection down (retrying); last error: ",
                        sub_->last_error.message())));
      break;
  }
  return handle;
}

void TlsTransport::SendSubscribe(const std::string& channel, bool subscribe) {
  Write(*sub_, FormatCommand({subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel}));
  if (subscribe) sub_->pending_subscribes.push_back(channel);
}

void TlsTransport::FireReady(uint64_t subscriber_id, absl::Status status) {
  if (!subscribers_.AwaitsReady(subscriber_id)) return;
  events_.Push([this, subscriber_id, status](bool cancelled) {
    SubscriberSet::ReadyCallback cb = subscribers_.TakeReady(subscriber_id);
    if (cb) std::move(cb)(cancelled ? absl::CancelledError("transport closed") : status);
  });
}

void TlsTransport::Unsubscribe(uint64_t subscriber_id) {
  const std::optional<std::string> channel = subscribers_.Remove(subscriber_id);
  if (!channel.has_value()) return;
  auto ch = channels_.find(*channel);
  if (ch == channels_.end()) return;
  auto& ids = ch->second->subscribers;
  ids.erase(std::remove(ids.begin(), ids.end(), subscriber_id), ids.end());
  if (ids.empty()) {
    channels_.erase(ch);
    if (!closed_ && sub_->state == Conn::State::kReady) SendSubscribe(*channel, false);
  }
}

void TlsTransport::OnPubSubReply(Conn& conn, Reply reply) {
  if (reply.is_error()) {
    if (conn.pending_subscribes.empty()) return;
    const std::string channel = conn.pending_subscribes.front();
    conn.pending_subscribes.pop_front();
    auto ch = channels_.find(channel);
    if (ch == channels_.end()) return;
    for (uint64_t id : ch->second->subscribers) {
      FireReady(id, absl::UnavailableError(absl::StrCat(Endpoint(), ": SUBSCRIBE ",
                                                        channel, ": ", reply.str)));
    }
    return;
  }
  if (!reply.is_array() || reply.elements.size() < 3 ||
      !reply.elements[0].is_string() || !reply.elements[1].is_string()) {
    return;
  }
  const std::string& kind = reply.elements[0].str;
  const std::string& channel = reply.elements[1].str;
  auto ch = channels_.find(channel);
  if (kind == "subscribe") {
    if (!conn.pending_subscribes.empty()) conn.pending_subscribes.pop_front();
    if (ch == channels_.end()) return;
    ch->second->confirmed = true;
    for (uint64_t id : ch->second->subscribers) FireReady(id, absl::OkStatus());
  } else if (kind == "message" && reply.elements[2].is_string()) {
    if (ch == channels_.end()) return;
    for (uint64_t id : ch->second->subscribers) {
      events_.Push([this, id, channel, message = reply.elements[2].str](bool cancelled) {
        if (!cancelled) subscribers_.DeliverMessage(id, channel, message);
      });
    }
  }
}

}  // namespace dlock
