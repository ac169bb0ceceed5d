#include "dlock/transport/uv/tls_transport.h"

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"

namespace dlock {
namespace {

// A connection that was ready this long and then broke is retried at once.
constexpr absl::Duration kStableConnection = absl::Seconds(1);
constexpr size_t kReadChunk = 64 * 1024;

void IgnoreSigpipeIfDefault() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

bool IsForbiddenCommand(const std::string& name) {
  for (const char* f : {"subscribe", "psubscribe", "unsubscribe", "punsubscribe",
                        "monitor", "ssubscribe", "sunsubscribe"}) {
    if (absl::EqualsIgnoreCase(name, f)) return true;
  }
  return false;
}

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

// The oldest error on OpenSSL's queue (and clears the queue).
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string out;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    const char* reason = ERR_reason_error_string(e);
    out = reason != nullptr ? reason : buf;
  }
  ERR_clear_error();
  return out.empty() ? "unknown OpenSSL error" : out;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return uv_inet_pton(AF_INET, host.c_str(), buf) == 0 ||
         uv_inet_pton(AF_INET6, host.c_str(), buf) == 0;
}

}  // namespace

// One command, from Send to its callback.
struct TlsTransport::Request {
  ReplyCallback callback;  // empty once delivered (deadline)
  TimerId timer = 0;
  std::string wire;        // the formatted command, until written
};

// One TCP + TLS stream. Freed by its uv close callback; `conn` is null once
// the transport let go of it.
struct TlsTransport::Link {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  Conn* conn = nullptr;
  SSL* ssl = nullptr;
  BIO* in = nullptr;   // ciphertext from the socket, read by OpenSSL
  BIO* out = nullptr;  // ciphertext from OpenSSL, written to the socket
  redisReader* reader = nullptr;
  char buf[kReadChunk];
  ~Link() {
    if (ssl != nullptr) SSL_free(ssl);  // frees the BIOs
    if (reader != nullptr) redisReaderFree(reader);
  }
};

struct TlsTransport::Conn {
  enum class State { kIdle, kConnecting, kReady, kBackoff };
  enum class Phase { kResolve, kTcp, kHandshake, kSetup };
  Conn(TlsTransport* owner, bool pubsub) : owner(owner), pubsub(pubsub) {}
  TlsTransport* const owner;
  const bool pubsub;
  State state = State::kIdle;
  Phase phase = Phase::kResolve;
  Link* link = nullptr;
  std::shared_ptr<bool> resolve_alive;  // set false to orphan a lookup
  TimerId attempt_timer = 0;
  TimerId retry_timer = 0;
  TimerId flush_timer = 0;
  int failures = 0;
  absl::Status last_error;
  absl::Time ready_at;
  bool saw_first_byte = false;
  int setup_replies = 0;  // AUTH/SELECT/PING replies still expected
  std::string out_plain;  // commands waiting for the next flush
  std::deque<std::unique_ptr<Request>> inflight;  // command conn: in order
  std::deque<std::string> pending_subscribes;     // pub/sub: SUBSCRIBE sent
};

struct TlsTransport::Channel {
  std::vector<uint64_t> subscribers;
  bool confirmed = false;
};

struct TlsTransport::Subscriber {
  std::string channel;
  MessageCallback on_message;
  absl::AnyInvocable<void(absl::Status) &&> on_ready;  // empty once fired
  SubscriptionImpl* handle = nullptr;
};

class TlsTransport::SubscriptionImpl : public Subscription {
 public:
  SubscriptionImpl(TlsTransport* t, uint64_t id) : transport_(t), id_(id) {}
  ~SubscriptionImpl() override {
    if (transport_ != nullptr) transport_->Unsubscribe(id_);
  }
  void Detach() { transport_ = nullptr; }

 private:
  TlsTransport* transport_;
  const uint64_t id_;
};

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TlsTransport>> TlsTransport::Create(
    uv_loop_s* loop, TlsTransportOptions options) {
  const HiredisTransportOptions& c = options.connection;
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (!c.unix_socket.empty()) {
    return absl::InvalidArgumentError("TLS needs host:port, not a unix socket");
  }
  if (c.host.empty()) return absl::InvalidArgumentError("empty host");
  if (c.port < 1 || c.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port ", c.port));
  }
  if (!c.username.empty() && c.password.empty()) {
    return absl::InvalidArgumentError("username without password");
  }
  if (c.db < 0) return absl::InvalidArgumentError("negative db");
  if (c.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout must be positive");
  }
  if (c.reconnect_backoff_min <= absl::ZeroDuration() ||
      c.reconnect_backoff_max < c.reconnect_backoff_min) {
    return absl::InvalidArgumentError(
        "need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (!(c.reconnect_jitter >= 0 && c.reconnect_jitter <= 1)) {
    return absl::InvalidArgumentError("reconnect_jitter must be in [0, 1]");
  }
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
      sub_(std::make_unique<Conn>(this, true)) {}

TlsTransport::~TlsTransport() {
  Close();
  for (auto& [id, s] : subscribers_) {
    if (s->handle != nullptr) s->handle->Detach();
  }
  SSL_CTX_free(ctx_);
}

std::string TlsTransport::Endpoint() const {
  return absl::StrCat(options_.connection.host, ":", options_.connection.port);
}

absl::Duration TlsTransport::BackoffDelay(int failures) {
  const HiredisTransportOptions& c = options_.connection;
  absl::Duration d = c.reconnect_backoff_min;
  for (int i = 1; i < failures && d < c.reconnect_backoff_max; ++i) d *= 2;
  d = std::min(d, c.reconnect_backoff_max);
  const double j = c.reconnect_jitter;
  if (j > 0) d *= absl::Uniform(rng_, 1.0 - j, 1.0);
  return d;
}

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

  struct Resolve {
    uv_getaddrinfo_t req;
    TlsTransport* t;
    Conn* conn;
    std::shared_ptr<bool> alive;
  };
  auto* r = new Resolve;
  r->t = this;
  r->conn = &conn;
  r->alive = std::make_shared<bool>(true);
  conn.resolve_alive = r->alive;
  r->req.data = r;
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  int rc = uv_getaddrinfo(
      loop_, &r->req,
      [](uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
        std::unique_ptr<Resolve> r(static_cast<Resolve*>(req->data));
        std::string ip;
        if (status == 0) {
          const struct addrinfo* pick = nullptr;
          for (const struct addrinfo* a = res; a != nullptr; a = a->ai_next) {
            if (a->ai_family == AF_INET) { pick = a; break; }
          }
          if (pick == nullptr) pick = res;
          char buf[64] = {0};
          if (pick != nullptr) {
            if (pick->ai_family == AF_INET) {
              uv_ip4_name(reinterpret_cast<const sockaddr_in*>(pick->ai_addr), buf,
                          sizeof(buf));
            } else {
              uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(pick->ai_addr), buf,
                          sizeof(buf));
            }
          }
          ip = buf;
        }
        uv_freeaddrinfo(res);
        if (!*r->alive) return;
        r->t->OnResolved(*r->conn, status, ip);
      },
      options_.connection.host.c_str(), nullptr, &hints);
  if (rc != 0) {
    delete r;
    conn.resolve_alive.reset();
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
  conn.resolve_alive.reset();
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
  Link* link = conn.link;
  const std::string where = Endpoint();
  long v = link != nullptr && link->ssl != nullptr ? SSL_get_verify_result(link->ssl)
                                                   : X509_V_OK;
  if (v != X509_V_OK && !options_.tls.insecure_skip_verify) {
    ERR_clear_error();
    const std::string name = options_.tls.server_name.empty()
                                 ? options_.connection.host
                                 : options_.tls.server_name;
    switch (v) {
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_UNTRUSTED:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: unknown CA: the certificate of ", where,
            " is not signed by a trusted CA (", X509_verify_cert_error_string(v),
            "; give its CA with --tls-ca-cert / TlsOptions::ca_file)"));
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " does not match the name \"", name,
            "\" (connect by a name it carries, or set --tls-server-name)"));
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " has expired"));
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " is not valid yet (check the clocks)"));
      default:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed for ", where, ": ",
            X509_verify_cert_error_string(v)));
    }
  }
  int err = link != nullptr && link->ssl != nullptr ? SSL_get_error(link->ssl, ret)
                                                    : SSL_ERROR_SSL;
  if (err == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return absl::UnavailableError(
        absl::StrCat("TLS: ", where, " closed the connection ", during));
  }
  std::string reason = OpenSslError();
  if (absl::StrContains(reason, "certificate required") ||
      (absl::StrContains(reason, "handshake failure") && options_.tls.cert_file.empty())) {
    return absl::UnavailableError(absl::StrCat(
        "TLS: ", where, " requires a client certificate (--tls-cert and --tls-key): ",
        reason));
  }
  if (absl::StrContains(reason, "unknown ca") || absl::StrContains(reason, "bad certificate")) {
    return absl::UnavailableError(absl::StrCat(
        "TLS: ", where, " refused the client certificate: ", reason));
  }
  return absl::UnavailableError(absl::StrCat("TLS ", during, " with ", where,
                                             " failed: ", reason));
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
      Push([w = std::move(w)](bool cancelled) mutable {
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
  if (conn.resolve_alive) {
    *conn.resolve_alive = false;
    conn.resolve_alive.reset();
  }
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
      Push([w = std::move(w), why](bool cancelled) mutable {
        std::move(w)(cancelled ? absl::CancelledError("transport closed") : why);
      });
    }
    connect_waiters_.clear();
  } else {
    for (auto& [id, s] : subscribers_) FireReady(id, why);
    if (subscribers_.empty()) {
      conn.state = Conn::State::kIdle;
      return;
    }
  }
  ScheduleAttempt(conn, BackoffDelay(conn.failures));
}

void TlsTransport::ConnectionLost(Conn& conn, absl::Status why) {
  if (closed_) return;
  const bool stable = timers_.Now() - conn.ready_at >= kStableConnection;
  std::deque<std::unique_ptr<Request>> inflight;
  inflight.swap(conn.inflight);
  Teardown(conn);
  conn.last_error = why;
  for (auto& r : inflight) Complete(std::move(r), why);
  if (conn.pubsub) {
    for (auto& [name, ch] : channels_) ch->confirmed = false;
    for (auto& [id, s] : subscribers_) FireReady(id, why);
  }
  if (stable) {
    conn.failures = 0;
    StartAttempt(conn);
  } else {
    ++conn.failures;
    ScheduleAttempt(conn, BackoffDelay(conn.failures));
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

// ---------------------------------------------------------------------------
// Commands.

absl::Status TlsTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                                ReplyCallback callback) {
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
  Push([cb = std::move(request->callback)](bool cancelled) mutable {
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
  Push([cb = std::move(request->callback), result = std::move(result)](
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

void TlsTransport::Push(absl::AnyInvocable<void(bool cancelled) &&> fn) {
  events_.push_back(std::move(fn));
  if (drain_timer_ == 0 && !closed_) {
    drain_timer_ = timers_.RunAfter(absl::ZeroDuration(), [this] {
      drain_timer_ = 0;
      DrainEvents();
    });
  }
}

void TlsTransport::DrainEvents() {
  std::weak_ptr<int> alive = life_;
  size_t n = events_.size();
  for (size_t i = 0; i < n && !events_.empty(); ++i) {
    auto fn = std::move(events_.front());
    events_.pop_front();
    std::move(fn)(false);
    if (alive.expired()) return;
  }
}

absl::Status TlsTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (cmd_->state == Conn::State::kReady) {
    Push([cb = std::move(callback)](bool cancelled) mutable {
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
    Push([w = std::move(w), cancelled](bool) mutable { std::move(w)(cancelled); });
  }
  connect_waiters_.clear();
  for (auto& [id, s] : subscribers_) {
    if (s->on_ready) {
      Push([cb = std::move(s->on_ready), cancelled](bool) mutable {
        std::move(cb)(cancelled);
      });
      s->on_ready = nullptr;
    }
  }
  if (drain_timer_ != 0) {
    timers_.Cancel(drain_timer_);
    drain_timer_ = 0;
  }
  // Deliver everything now, inside Close.
  while (!events_.empty()) {
    auto fn = std::move(events_.front());
    events_.pop_front();
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
  const uint64_t id = next_subscriber_id_++;
  auto sub = std::make_unique<Subscriber>();
  sub->channel = channel;
  sub->on_message = std::move(on_message);
  sub->on_ready = std::move(on_ready);
  auto handle = std::make_unique<SubscriptionImpl>(this, id);
  sub->handle = handle.get();
  subscribers_[id] = std::move(sub);
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
  return std::unique_ptr<Subscription>(std::move(handle));
}

void TlsTransport::SendSubscribe(const std::string& channel, bool subscribe) {
  Write(*sub_, FormatCommand({subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel}));
  if (subscribe) sub_->pending_subscribes.push_back(channel);
}

void TlsTransport::FireReady(uint64_t subscriber_id, absl::Status status) {
  auto it = subscribers_.find(subscriber_id);
  if (it == subscribers_.end() || !it->second->on_ready) return;
  Push([this, subscriber_id, status](bool cancelled) {
    auto it = subscribers_.find(subscriber_id);
    if (it == subscribers_.end() || !it->second->on_ready) return;
    auto cb = std::move(it->second->on_ready);
    it->second->on_ready = nullptr;
    std::move(cb)(cancelled ? absl::CancelledError("transport closed") : status);
  });
}

void TlsTransport::Unsubscribe(uint64_t subscriber_id) {
  auto it = subscribers_.find(subscriber_id);
  if (it == subscribers_.end()) return;
  const std::string channel = it->second->channel;
  subscribers_.erase(it);
  auto ch = channels_.find(channel);
  if (ch == channels_.end()) return;
  auto& ids = ch->second->subscribers;
  ids.erase(std::remove(ids.begin(), ids.end(), subscriber_id), ids.end());
  if (ids.empty()) {
    channels_.erase(ch);
    if (!closed_ && sub_->state == Conn::State::kReady) SendSubscribe(channel, false);
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
      Push([this, id, channel, message = reply.elements[2].str](bool cancelled) {
        if (cancelled) return;
        auto it = subscribers_.find(id);
        if (it == subscribers_.end()) return;
        // on_message may destroy its own subscription (or the transport).
        std::weak_ptr<int> alive = life_;
        MessageCallback cb = std::move(it->second->on_message);
        cb(channel, message);
        if (alive.expired()) return;
        it = subscribers_.find(id);
        if (it != subscribers_.end()) it->second->on_message = std::move(cb);
      });
    }
  }
}

}  // namespace dlock
