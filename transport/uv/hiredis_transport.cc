#include "dlock/transport/uv/hiredis_transport.h"

#include <arpa/inet.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"

namespace dlock {
namespace {

// A connection lost sooner than this after it became ready counts as a
// failed attempt (backoff) rather than a loss (immediate reconnect).
constexpr absl::Duration kStableConnection = absl::Seconds(1);

// ---------------------------------------------------------------------------
// hiredis <-> libuv glue.
//
// This replaces hiredis 0.14.1's adapters/libuv.h, whose poll callback
// returns early on a non-zero status: when a connect is refused, libuv
// reports POLLERR as status UV_EBADF (and stops the poll), the adapter drops
// it, hiredis never learns the connect failed, and the attempt hangs. Here an
// error status is handed to hiredis as "readable/writable", so its own
// read/write sees the socket error and fails the connection.
struct UvPoll {
  uv_poll_t handle;
  redisAsyncContext* context;  // null once hiredis has cleaned up
  int events;
};

void PollUpdate(UvPoll* p);

void OnPoll(uv_poll_t* handle, int status, int events) {
  UvPoll* p = static_cast<UvPoll*>(handle->data);
  int ev = events;
  if (status < 0) {
    ev = p->events;
    // libuv stopped the handle on error; keep watching what hiredis wants.
    if (p->context != nullptr && p->events != 0) PollUpdate(p);
  }
  if (p->context != nullptr && (ev & UV_READABLE)) redisAsyncHandleRead(p->context);
  if (p->context != nullptr && (ev & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

void PollUpdate(UvPoll* p) {
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, OnPoll);
  } else {
    uv_poll_stop(&p->handle);
  }
}

void PollAddRead(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->events |= UV_READABLE;
  PollUpdate(p);
}
void PollDelRead(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->events &= ~UV_READABLE;
  PollUpdate(p);
}
void PollAddWrite(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->events |= UV_WRITABLE;
  PollUpdate(p);
}
void PollDelWrite(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->events &= ~UV_WRITABLE;
  PollUpdate(p);
}
void PollCleanup(void* data) {
  UvPoll* p = static_cast<UvPoll*>(data);
  p->context = nullptr;
  // The memory may only be freed in the close callback.
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<UvPoll*>(h->data); });
}

bool AttachToLoop(redisAsyncContext* ac, uv_loop_t* loop) {
  if (ac->ev.data != nullptr) return false;
  UvPoll* p = new UvPoll{};
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
    delete p;  // not registered with the loop when init fails
    return false;
  }
  p->handle.data = p;
  p->context = ac;
  ac->ev.data = p;
  ac->ev.addRead = PollAddRead;
  ac->ev.delRead = PollDelRead;
  ac->ev.addWrite = PollAddWrite;
  ac->ev.delWrite = PollDelWrite;
  ac->ev.cleanup = PollCleanup;
  return true;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool IsForbiddenCommand(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  return upper == "SUBSCRIBE" || upper == "PSUBSCRIBE" || upper == "UNSUBSCRIBE" ||
         upper == "PUNSUBSCRIBE" || upper == "MONITOR" || upper == "SSUBSCRIBE" ||
         upper == "SUNSUBSCRIBE";
}

void IgnoreSigpipeIfDefault() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Internal state.

struct HiredisTransport::Request {
  ReplyCallback callback;
  std::vector<std::string> argv;  // kept only while waiting for a connection
  TimerId timer = 0;              // deadline timer while armed
  bool done = false;              // callback delivered (e.g. timed out)
  bool internal = false;          // AUTH / SELECT of the handshake
  std::string internal_name;
  absl::StatusOr<Reply> result = absl::UnknownError("no result");
};

// One hiredis context (one connection attempt and, if it succeeds, the
// connection). Deleted when hiredis is done with the context.
struct HiredisTransport::Link {
  HiredisTransport* owner;
  Conn* conn;
  uint64_t serial;
  redisAsyncContext* ac = nullptr;
  Resolver* resolving = nullptr;
  std::deque<std::unique_ptr<Request>> fifo;  // sent, in reply order
  bool tearing_down = false;                  // we are freeing the context
  absl::Status fail_status;                   // for replies cut off by us
  int handshake_left = 0;
  bool handshake_failed = false;
};

// A connection that persists across reconnects: the command connection or
// the pub/sub connection.
struct HiredisTransport::Conn {
  enum class State { kIdle, kConnecting, kReady, kBackoff };
  explicit Conn(bool pubsub) : pubsub(pubsub) {}
  const bool pubsub;
  State state = State::kIdle;
  Link* link = nullptr;
  uint64_t serial = 0;
  int failures = 0;  // consecutive failed attempts and quick losses
  absl::Time ready_since = absl::InfinitePast();
  TimerId attempt_timer = 0;
  TimerId connect_timer = 0;
  absl::Status last_error;
};

struct HiredisTransport::Resolver {
  uv_getaddrinfo_t req;
  Link* link;  // null once abandoned
};

struct HiredisTransport::Channel {
  std::vector<uint64_t> subscribers;
  bool confirmed = false;   // the server confirmed on the current connection
  bool sub_sent = false;    // SUBSCRIBE sent, not yet confirmed
  bool unsub_sent = false;  // UNSUBSCRIBE sent, not yet confirmed
};

struct HiredisTransport::Subscriber {
  std::string channel;
  MessageCallback on_message;
  absl::AnyInvocable<void(absl::Status) &&> on_ready;
  SubscriptionImpl* handle = nullptr;
};

class HiredisTransport::SubscriptionImpl : public Subscription {
 public:
  SubscriptionImpl(HiredisTransport* transport, uint64_t id)
      : transport_(transport), id_(id) {}
  ~SubscriptionImpl() override {
    if (transport_ != nullptr) transport_->Unsubscribe(id_);
  }
  void Detach() { transport_ = nullptr; }

 private:
  HiredisTransport* transport_;
  const uint64_t id_;
};

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<HiredisTransport>> HiredisTransport::Create(
    uv_loop_s* loop, HiredisTransportOptions options) {
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (options.unix_socket.empty()) {
    if (options.host.empty()) return absl::InvalidArgumentError("empty host");
    if (options.port < 1 || options.port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port ", options.port));
    }
  }
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError("username without password");
  }
  if (options.db < 0) return absl::InvalidArgumentError("negative db");
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= absl::ZeroDuration() ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return absl::InvalidArgumentError(
        "need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (!(options.reconnect_jitter >= 0 && options.reconnect_jitter <= 1)) {
    return absl::InvalidArgumentError("reconnect_jitter must be in [0, 1]");
  }
  IgnoreSigpipeIfDefault();
  auto t = std::unique_ptr<HiredisTransport>(
      new HiredisTransport(loop, std::move(options)));
  t->StartAttempt(*t->cmd_);
  return t;
}

HiredisTransport::HiredisTransport(uv_loop_s* loop, HiredisTransportOptions options)
    : loop_(loop),
      options_(std::move(options)),
      timers_(loop),
      cmd_(std::make_unique<Conn>(false)),
      sub_(std::make_unique<Conn>(true)) {}

HiredisTransport::~HiredisTransport() {
  Close();
  for (auto& [id, s] : subscribers_) {
    if (s->handle != nullptr) s->handle->Detach();
  }
}

std::string HiredisTransport::Endpoint() const {
  if (!options_.unix_socket.empty()) return options_.unix_socket;
  return absl::StrCat(options_.host, ":", options_.port);
}

bool HiredisTransport::connected() const {
  return cmd_->state == Conn::State::kReady;
}

uint64_t HiredisTransport::connection_epoch() const {
  return !closed_ && connected() ? cmd_epoch_ : 0;
}

absl::Status HiredisTransport::last_error() const { return cmd_->last_error; }

size_t HiredisTransport::pending_commands() const { return pending_; }

// ---------------------------------------------------------------------------
// Connections.

void HiredisTransport::ScheduleAttempt(Conn& conn, absl::Duration delay) {
  if (conn.attempt_timer != 0) timers_.Cancel(conn.attempt_timer);
  Conn* c = &conn;
  conn.attempt_timer = timers_.RunAfter(delay, [this, c] {
    c->attempt_timer = 0;
    StartAttempt(*c);
  });
}

absl::Duration HiredisTransport::BackoffDelay(int failures) {
  absl::Duration d = options_.reconnect_backoff_min;
  for (int i = 1; i < failures && d < options_.reconnect_backoff_max; ++i) d *= 2;
  d = std::min(d, options_.reconnect_backoff_max);
  const double j = options_.reconnect_jitter;
  if (j > 0) d *= absl::Uniform(rng_, 1.0 - j, 1.0);
  return d;
}

void HiredisTransport::StartAttempt(Conn& conn) {
  if (closed_) return;
  if (conn.attempt_timer != 0) {
    timers_.Cancel(conn.attempt_timer);
    conn.attempt_timer = 0;
  }
  if (conn.link != nullptr) return;  // an attempt is already under way
  conn.state = Conn::State::kConnecting;
  Link* link = new Link{this, &conn, ++conn.serial};
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
  Resolver* r = new Resolver{{}, link};
  r->req.data = r;
  link->resolving = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = uv_getaddrinfo(
      loop_, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        Resolver* r = static_cast<Resolver*>(req->data);
        Link* link = r->link;
        delete r;
        if (link == nullptr) {  // abandoned (teardown or close)
          if (res != nullptr) uv_freeaddrinfo(res);
          return;
        }
        link->resolving = nullptr;
        HiredisTransport* self = link->owner;
        Conn& conn = *link->conn;
        char ip[INET6_ADDRSTRLEN] = {0};
        if (status == 0 && res != nullptr) {
          // Prefer IPv4 (servers are often bound to 127.0.0.1 only while
          // "localhost" resolves to ::1 first), else the first address.
          const addrinfo* pick = res;
          for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
            if (a->ai_family == AF_INET) {
              pick = a;
              break;
            }
          }
          if (pick->ai_family == AF_INET6) {
            uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(pick->ai_addr), ip, sizeof(ip));
          } else if (pick->ai_family == AF_INET) {
            uv_ip4_name(reinterpret_cast<const sockaddr_in*>(pick->ai_addr), ip, sizeof(ip));
          }
        }
        if (res != nullptr) uv_freeaddrinfo(res);
        if (status != 0 || ip[0] == '\0') {
          absl::Status why = absl::UnavailableError(
              absl::StrCat(self->Endpoint(), ": cannot resolve host: ",
                           status != 0 ? uv_strerror(status) : "no address"));
          self->Teardown(conn, why);
          self->AttemptFailed(conn, why);
          return;
        }
        self->ConnectResolved(conn, ip);
      },
      options_.host.c_str(), nullptr, &hints);
  if (rc != 0) {
    delete r;
    link->resolving = nullptr;
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
  } else if (!AttachToLoop(ac, loop_)) {
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
  if (link->resolving != nullptr) {
    link->resolving->link = nullptr;
    uv_cancel(reinterpret_cast<uv_req_t*>(&link->resolving->req));
    link->resolving = nullptr;
  }
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
    std::deque<std::unique_ptr<Request>> waiting;
    waiting.swap(waiting_);
    for (auto& r : waiting) Complete(std::move(r), why);
    for (auto& cb : connect_waiters_) {
      Push(FnEvent([cb = std::move(cb), why](bool cancelled) mutable {
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
  ScheduleAttempt(conn, BackoffDelay(conn.failures));
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
  if (timers_.Now() - conn.ready_since >= kStableConnection) {
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
    ScheduleAttempt(conn, BackoffDelay(conn.failures));
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
    r->internal_name = argv[0];
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
    std::deque<std::unique_ptr<Request>> waiting;
    waiting.swap(waiting_);
    for (auto& r : waiting) {
      if (r->done) continue;  // timed out while waiting
      std::vector<std::string> argv = std::move(r->argv);
      Issue(conn.link, std::move(r), argv);
    }
    for (auto& cb : connect_waiters_) {
      Push(FnEvent([cb = std::move(cb)](bool cancelled) mutable {
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

// ---------------------------------------------------------------------------
// Commands.

absl::Status HiredisTransport::Send(std::vector<std::string> argv,
                                    absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (argv.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("too many arguments");
  }
  if (IsForbiddenCommand(argv[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(argv[0], " changes the connection's protocol; use Subscribe"));
  }
  auto r = std::make_unique<Request>();
  r->callback = std::move(callback);
  ++pending_;
  Request* raw = r.get();
  r->timer = timers_.RunAfter(timeout, [this, raw] { OnDeadline(raw); });
  switch (cmd_->state) {
    case Conn::State::kReady:
      Issue(cmd_->link, std::move(r), argv);
      break;
    case Conn::State::kIdle:
    case Conn::State::kConnecting:
      r->argv = std::move(argv);
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

void HiredisTransport::Issue(Link* link, std::unique_ptr<Request> request,
                             const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  int rc = redisAsyncCommandArgv(
      link->ac,
      [](redisAsyncContext* ac, void* reply, void* privdata) {
        Link* link = static_cast<Link*>(privdata);
        link->owner->OnReply(link, reply);
      },
      link, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (rc != REDIS_OK) {
    // Only when the context is already going away.
    if (!request->internal) {
      Complete(std::move(request),
               absl::UnavailableError(absl::StrCat(Endpoint(), ": connection closing")));
    }
    return;
  }
  link->fifo.push_back(std::move(request));
}

void HiredisTransport::OnReply(Link* link, void* raw_reply) {
  if (link->fifo.empty()) return;  // cannot happen: one entry per command
  std::unique_ptr<Request> r = std::move(link->fifo.front());
  link->fifo.pop_front();
  const redisReply* reply = static_cast<const redisReply*>(raw_reply);
  if (r->internal) {
    if (reply == nullptr || link->tearing_down || link->handshake_failed) return;
    if (reply->type == REDIS_REPLY_ERROR) {
      link->handshake_failed = true;
      absl::Status why = absl::UnavailableError(
          absl::StrCat(Endpoint(), ": ", r->internal_name, " failed: ",
                       std::string(reply->str, reply->len)));
      // Free the context outside its own callback.
      Conn* c = link->conn;
      const uint64_t serial = link->serial;
      timers_.RunAfter(absl::ZeroDuration(), [this, c, serial, why] {
        if (c->link == nullptr || c->link->serial != serial) return;
        Teardown(*c, why);
        AttemptFailed(*c, why);
      });
      return;
    }
    if (--link->handshake_left == 0) OnReady(*link->conn);
    return;
  }
  if (r->done) return;  // its deadline passed: drop the late reply
  if (reply != nullptr) {
    Complete(std::move(r), ReplyFromHiredis(*reply));
  } else if (link->tearing_down) {
    Complete(std::move(r), link->fail_status);
  } else {
    const char* err = link->ac != nullptr ? link->ac->errstr : nullptr;
    Complete(std::move(r),
             absl::UnavailableError(absl::StrCat(
                 Endpoint(), ": connection lost",
                 err != nullptr && err[0] ? absl::StrCat(": ", err) : "")));
  }
}

void HiredisTransport::Complete(std::unique_ptr<Request> request,
                                absl::StatusOr<Reply> result) {
  if (request->done) return;
  if (request->timer != 0) {
    // The outcome is known: it is delivered even if the deadline passes
    // before the next loop turn.
    timers_.Cancel(request->timer);
    request->timer = 0;
  }
  request->result = std::move(result);
  Event e;
  e.request = std::move(request);
  Push(std::move(e));
}

void HiredisTransport::OnDeadline(Request* request) {
  request->timer = 0;
  if (request->done) return;
  request->done = true;
  --pending_;
  // The request stays where it is (waiting queue or reply FIFO) so that the
  // reply order stays right; its late reply is dropped.
  ReplyCallback cb = std::move(request->callback);
  std::move(cb)(absl::DeadlineExceededError(
      absl::StrCat(Endpoint(), ": no reply before the command's deadline")));
  // `this` may be gone now.
}

HiredisTransport::Event HiredisTransport::FnEvent(
    absl::AnyInvocable<void(bool cancelled) &&> fn) {
  Event e;
  e.fn = std::move(fn);
  return e;
}

void HiredisTransport::Push(Event event) {
  events_.push_back(std::move(event));
  if (drain_timer_ == 0) {
    drain_timer_ = timers_.RunAfter(absl::ZeroDuration(), [this] {
      drain_timer_ = 0;
      DrainEvents();
    });
  }
}

void HiredisTransport::DrainEvents() {
  std::weak_ptr<int> life = life_;
  // Only what is queued now: a callback that sends again cannot starve the
  // loop.
  size_t n = events_.size();
  for (size_t i = 0; i < n && !events_.empty(); ++i) {
    Event e = std::move(events_.front());
    events_.pop_front();
    if (e.request != nullptr) {
      Request& r = *e.request;
      if (r.done) continue;
      r.done = true;
      --pending_;
      ReplyCallback cb = std::move(r.callback);
      std::move(cb)(std::move(r.result));
    } else if (e.ready_for != 0) {
      auto it = subscribers_.find(e.ready_for);
      if (it == subscribers_.end() || !it->second->on_ready) continue;
      auto cb = std::move(it->second->on_ready);
      std::move(cb)(std::move(e.ready_status));
    } else if (e.fn) {
      std::move(e.fn)(false);
    }
    if (life.expired()) return;
  }
  if (!events_.empty() && drain_timer_ == 0) {
    drain_timer_ = timers_.RunAfter(absl::ZeroDuration(), [this] {
      drain_timer_ = 0;
      DrainEvents();
    });
  }
}

absl::Status HiredisTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  switch (cmd_->state) {
    case Conn::State::kReady:
      Push(FnEvent([cb = std::move(callback)](bool cancelled) mutable {
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

void HiredisTransport::Close() {
  if (closed_) return;
  closed_ = true;
  const absl::Status cancelled = absl::CancelledError("transport closed");
  for (Conn* c : {cmd_.get(), sub_.get()}) {
    if (c->attempt_timer != 0) timers_.Cancel(c->attempt_timer);
    if (c->connect_timer != 0) timers_.Cancel(c->connect_timer);
    c->attempt_timer = c->connect_timer = 0;
    Teardown(*c, cancelled);  // in-flight commands → events_
    c->state = Conn::State::kIdle;
  }
  if (drain_timer_ != 0) {
    timers_.Cancel(drain_timer_);
    drain_timer_ = 0;
  }
  // Everything still owed a callback, in order: answered or cut-off commands
  // first, then commands that were waiting for a connection, then waiters.
  std::vector<absl::AnyInvocable<void() &&>> owed;
  auto owe_request = [&](std::unique_ptr<Request> r) {
    if (r->timer != 0) timers_.Cancel(r->timer);
    if (r->done) return;
    r->done = true;
    --pending_;
    owed.push_back([cb = std::move(r->callback), cancelled]() mutable {
      std::move(cb)(cancelled);
    });
  };
  for (Event& e : events_) {
    if (e.request != nullptr) {
      owe_request(std::move(e.request));
    } else if (e.ready_for != 0) {
      continue;  // the subscriber loop below owes its on_ready
    } else if (e.fn) {
      owed.push_back([fn = std::move(e.fn)]() mutable { std::move(fn)(true); });
    }
  }
  events_.clear();
  for (auto& r : waiting_) owe_request(std::move(r));
  waiting_.clear();
  for (auto& cb : connect_waiters_) {
    owed.push_back([cb = std::move(cb), cancelled]() mutable { std::move(cb)(cancelled); });
  }
  connect_waiters_.clear();
  for (auto& [id, s] : subscribers_) {
    if (s->on_ready) {
      owed.push_back([cb = std::move(s->on_ready), cancelled]() mutable {
        std::move(cb)(cancelled);
      });
    }
  }
  channels_.clear();
  // Run them touching no member: a callback may destroy the transport.
  for (auto& fn : owed) std::move(fn)();
}

// ---------------------------------------------------------------------------
// Pub/sub.

absl::StatusOr<std::unique_ptr<Subscription>> HiredisTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  const uint64_t id = next_subscriber_id_++;
  auto s = std::make_unique<Subscriber>();
  s->channel = channel;
  s->on_message = std::move(on_message);
  s->on_ready = std::move(on_ready);
  auto handle = std::make_unique<SubscriptionImpl>(this, id);
  s->handle = handle.get();
  subscribers_.emplace(id, std::move(s));
  auto& slot = channels_[channel];
  if (slot == nullptr) slot = std::make_unique<Channel>();
  Channel& ch = *slot;
  ch.subscribers.push_back(id);
  switch (sub_->state) {
    case Conn::State::kIdle:
      StartAttempt(*sub_);
      break;
    case Conn::State::kConnecting:
      break;  // OnReady subscribes every channel
    case Conn::State::kReady:
      if (ch.confirmed && !ch.unsub_sent) {
        FireReady(id, absl::OkStatus());
      } else if (!ch.sub_sent && !ch.unsub_sent) {
        SendSubscribe(channel, true);
      }
      break;
    case Conn::State::kBackoff:
      FireReady(id, absl::UnavailableError(absl::StrCat(
                        "pub/sub not connected (retrying in the background); "
                        "last error: ",
                        sub_->last_error.message())));
      break;
  }
  return std::unique_ptr<Subscription>(std::move(handle));
}

void HiredisTransport::FireReady(uint64_t id, absl::Status status) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end() || !it->second->on_ready) return;
  // Runs only if the subscription still exists then (see DrainEvents).
  Event e;
  e.ready_for = id;
  e.ready_status = std::move(status);
  Push(std::move(e));
}

void HiredisTransport::FailPendingReady(const absl::Status& why) {
  for (auto& [id, s] : subscribers_) {
    if (s->on_ready) FireReady(id, why);
  }
}

void HiredisTransport::SendSubscribe(const std::string& channel, bool subscribe) {
  Link* link = sub_->link;
  auto it = channels_.find(channel);
  if (link == nullptr || link->ac == nullptr || it == channels_.end()) return;
  const char* argv[2] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel.data()};
  size_t lens[2] = {std::strlen(argv[0]), channel.size()};
  int rc = redisAsyncCommandArgv(
      link->ac,
      [](redisAsyncContext*, void* reply, void* privdata) {
        if (reply == nullptr) return;  // connection going away
        Link* link = static_cast<Link*>(privdata);
        link->owner->OnPubSubMessage(link, reply);
      },
      link, 2, argv, lens);
  if (rc != REDIS_OK) return;  // the context is closing; reconnect resubscribes
  if (subscribe) {
    it->second->sub_sent = true;
  } else {
    it->second->unsub_sent = true;
  }
}

void HiredisTransport::OnPubSubMessage(Link* link, void* raw_reply) {
  const redisReply* reply = static_cast<const redisReply*>(raw_reply);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
  const redisReply* kind_r = reply->element[0];
  const redisReply* name_r = reply->element[1];
  if (kind_r->type != REDIS_REPLY_STRING || name_r->type != REDIS_REPLY_STRING) return;
  const std::string kind(kind_r->str, kind_r->len);
  std::string name(name_r->str, name_r->len);
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  Channel& ch = *it->second;
  if (kind == "message") {
    const redisReply* payload_r = reply->element[2];
    if (payload_r->type != REDIS_REPLY_STRING) return;
    auto msg = std::make_shared<std::pair<std::string, std::string>>(
        name, std::string(payload_r->str, payload_r->len));
    for (uint64_t id : ch.subscribers) {
      Push(FnEvent([this, id, msg](bool cancelled) {
              if (!cancelled) DeliverMessage(id, msg->first, msg->second);
            }));
    }
  } else if (kind == "subscribe") {
    ch.sub_sent = false;
    ch.confirmed = true;
    for (uint64_t id : ch.subscribers) FireReady(id, absl::OkStatus());
  } else if (kind == "unsubscribe") {
    ch.unsub_sent = false;
    ch.confirmed = false;
    if (ch.subscribers.empty()) {
      if (!ch.sub_sent) channels_.erase(it);
    } else if (!ch.sub_sent) {
      SendSubscribe(name, true);  // someone subscribed again meanwhile
    }
  }
}

void HiredisTransport::DeliverMessage(uint64_t id, const std::string& channel,
                                      const std::string& message) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end() || !it->second->on_message) return;
  // Call a local copy of the callback: the subscription (or the transport)
  // may be destroyed inside it.
  MessageCallback fn = std::move(it->second->on_message);
  std::weak_ptr<int> life = life_;
  fn(channel, message);
  if (life.expired()) return;
  it = subscribers_.find(id);
  if (it != subscribers_.end() && !it->second->on_message) {
    it->second->on_message = std::move(fn);
  }
}

void HiredisTransport::Unsubscribe(uint64_t id) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  const std::string channel = it->second->channel;
  subscribers_.erase(it);
  auto cit = channels_.find(channel);
  if (cit == channels_.end()) return;
  Channel& ch = *cit->second;
  ch.subscribers.erase(std::remove(ch.subscribers.begin(), ch.subscribers.end(), id),
                       ch.subscribers.end());
  if (!ch.subscribers.empty() || closed_) return;
  if (sub_->state == Conn::State::kReady && (ch.confirmed || ch.sub_sent)) {
    if (!ch.unsub_sent) SendSubscribe(channel, false);
  } else if (!ch.unsub_sent) {
    channels_.erase(cit);
  }
}

}  // namespace dlock
