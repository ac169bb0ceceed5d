#include "dlock/transport/uv/sentinel_transport.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/tls_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {
namespace {

// Sentinels over HiredisTransport with the sentinels' AUTH; data nodes over
// HiredisTransport, or TlsTransport when `options.tls`.
SentinelConnectionFactory UvConnectionFactory(uv_loop_s* loop,
                                              const SentinelTransportOptions& options) {
  HiredisTransportOptions sentinel = options.master;
  sentinel.username = options.sentinel_username;
  sentinel.password = options.sentinel_password;
  sentinel.db = 0;
  sentinel.unix_socket.clear();
  return [loop, master = options.master, sentinel, tls = options.tls,
          tls_options = options.tls_options](
             const std::string& host, int port,
             bool is_sentinel) -> absl::StatusOr<std::unique_ptr<Transport>> {
    HiredisTransportOptions o = is_sentinel ? sentinel : master;
    o.unix_socket.clear();
    o.host = host;
    o.port = port;
    if (!is_sentinel && tls) {
      TlsTransportOptions t;
      t.connection = std::move(o);
      t.tls = tls_options;
      absl::StatusOr<std::unique_ptr<TlsTransport>> c = TlsTransport::Create(loop, t);
      if (!c.ok()) return c.status();
      return std::unique_ptr<Transport>(*std::move(c));
    }
    absl::StatusOr<std::unique_ptr<HiredisTransport>> c =
        HiredisTransport::Create(loop, std::move(o));
    if (!c.ok()) return c.status();
    return std::unique_ptr<Transport>(*std::move(c));
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentinelTransport>> SentinelTransport::Create(
    uv_loop_s* loop, SentinelTransportOptions options) {
  auto owned = std::make_unique<UvEventLoop>(loop);
  ConnectionFactory factory = UvConnectionFactory(loop, options);
  EventLoop* events = owned.get();
  std::unique_ptr<SentinelTransport> t(new SentinelTransport(
      events, std::move(owned), std::move(options), std::move(factory)));
  absl::Status s = t->Start();
  if (!s.ok()) return s;
  return t;
}

absl::StatusOr<std::unique_ptr<SentinelTransport>> SentinelTransport::Create(
    EventLoop* loop, SentinelTransportOptions options, ConnectionFactory factory) {
  std::unique_ptr<SentinelTransport> t(
      new SentinelTransport(loop, nullptr, std::move(options), std::move(factory)));
  absl::Status s = t->Start();
  if (!s.ok()) return s;
  return t;
}

SentinelTransport::SentinelTransport(EventLoop* loop, std::unique_ptr<EventLoop> owned_loop,
                                     SentinelTransportOptions options,
                                     ConnectionFactory factory)
    : loop_(loop),
      owned_loop_(std::move(owned_loop)),
      options_(std::move(options)),
      factory_(std::move(factory)),
      master_(loop, [this] { discovery_.Discover(); }),
      discovery_(loop, options_, &factory_, &sentinels_, &master_,
                 {[this](std::unique_ptr<Transport> m, std::string host, int port) {
                    OnNewMaster(std::move(m), std::move(host), port);
                  },
                  [this] { OnConfirmed(); }, [this] { master_.Drop(); },
                  [this](const absl::Status& why) { OnRoundFailed(why); }}),
      waiters_(loop, [this](absl::Duration timeout) {
        const absl::Status& why = discovery_.last_error();
        return absl::DeadlineExceededError(absl::StrCat(
            "Sentinel: no master found for '", options_.master_name, "' within ",
            absl::FormatDuration(timeout),
            why.ok() ? "" : absl::StrCat(" (", why.message(), ")")));
      }) {}

SentinelTransport::~SentinelTransport() {
  Close();
  life_.reset();
}

absl::Status SentinelTransport::Start() {
  absl::Status s = ValidateSentinelOptions(options_);
  if (!s.ok()) return s;
  s = sentinels_.Start(options_, factory_, [this] { discovery_.Discover(); });
  if (!s.ok()) return s;
  discovery_.Discover();
  return absl::OkStatus();
}

// ---- Discovery outcomes -----------------------------------------------------

void SentinelTransport::OnNewMaster(std::unique_ptr<Transport> master, std::string host,
                                    int port) {
  // The old master's commands in flight fail with kUnavailable; the
  // subscriptions move to the new one.
  master_.Replace(std::move(master), std::move(host), port);
}

void SentinelTransport::OnConfirmed() {
  std::weak_ptr<int> life = life_;
  // Commands that waited for a master go out now, in the order sent.
  waiters_.SendAll(*this);
  if (life.expired()) return;
  waiters_.FireConnect(absl::OkStatus());
}

void SentinelTransport::OnRoundFailed(const absl::Status& why) {
  std::weak_ptr<int> life = life_;
  waiters_.FireConnect(why);
  if (life.expired() || closed_) return;
  if (master_.get() != nullptr) return;
  waiters_.FailCommands(why);
  if (life.expired() || closed_) return;
  // Subscriptions still waiting for a first master learn why there is none.
  SubscriptionRelay& subs = master_.subscriptions();
  for (uint64_t id : subs.UnplacedWaiting()) {
    subs.Ready(id, why);
    if (life.expired() || closed_) return;
  }
}

// ---- Commands and subscriptions ---------------------------------------------

absl::Status SentinelTransport::Send(std::vector<std::string> argv,
                                     absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  absl::Status s = ValidateSendArguments(argv, timeout, callback != nullptr);
  if (!s.ok()) return s;
  if (master_.get() == nullptr) {
    // Waits for the discovery round (bounded by `timeout`), as a command
    // waits for a connection being made.
    discovery_.Discover();
    waiters_.HoldCommand(std::move(argv), timeout, std::move(callback));
    return absl::OkStatus();
  }
  return master_.Send(std::move(argv), timeout, std::move(callback));
}

absl::Status SentinelTransport::SendScript(absl::string_view body,
                                           absl::Span<const absl::string_view> evalsha_argv,
                                           absl::Duration timeout, ReplyCallback callback) {
  if (closed_ || master_.get() == nullptr) {
    // Held (as EVAL) until a master is confirmed, like any command.
    return Transport::SendScript(body, evalsha_argv, timeout, std::move(callback));
  }
  if (evalsha_argv.size() < 3) {
    return absl::InvalidArgumentError("a script command needs EVALSHA, sha1 and numkeys");
  }
  if (absl::Status s = ValidateSendArguments(evalsha_argv.size(), evalsha_argv[0], timeout,
                                             callback != nullptr);
      !s.ok()) {
    return s;
  }
  return master_.SendScript(body, evalsha_argv, timeout, std::move(callback));
}

absl::Status SentinelTransport::SendTransaction(
    absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout,
    ReplyCallback callback) {
  // No master (or closed): kUnimplemented, the caller's script waits instead.
  if (closed_ || master_.get() == nullptr) return Transport::SendTransaction({}, timeout, {});
  return master_.SendTransaction(commands, timeout, std::move(callback));
}

absl::StatusOr<std::unique_ptr<Subscription>> SentinelTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  if (!on_message) return absl::InvalidArgumentError("on_message must not be null");
  std::unique_ptr<Subscription> handle =
      master_.Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
  if (master_.get() == nullptr) discovery_.Discover();
  return handle;
}

// ---- Lifecycle --------------------------------------------------------------

absl::Status SentinelTransport::Connect(
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  waiters_.AddConnect(std::move(callback));
  if (connected() && !discovery_.discovering()) {
    // Answered on a later turn (never inside this call).
    if (retry_ready_timer_ != 0) return absl::OkStatus();
    retry_ready_timer_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
      retry_ready_timer_ = 0;
      if (connected()) {
        waiters_.FireConnect(absl::OkStatus());
      } else {
        discovery_.Discover();
      }
    });
  } else {
    discovery_.Discover();
  }
  return absl::OkStatus();
}

void SentinelTransport::Close() {
  if (closed_) return;
  closed_ = true;
  discovery_.Stop();
  master_.Stop();
  if (retry_ready_timer_ != 0) loop_->Cancel(retry_ready_timer_);
  retry_ready_timer_ = 0;
  std::weak_ptr<int> life = life_;
  const absl::Status cancelled = absl::CancelledError("Sentinel transport closed");
  waiters_.FireConnect(cancelled);
  if (life.expired()) return;
  waiters_.FailCommands(cancelled);
  if (life.expired()) return;
  sentinels_.Unsubscribe();
  for (auto& r : master_.subscriptions().DetachAllAndTakeReady()) {
    std::move(r)(cancelled);
    if (life.expired()) return;
  }
  master_.CloseMaster();
  if (life.expired()) return;
  discovery_.CloseCandidate();
  sentinels_.CloseAll();
  master_.CloseBuried();
}

bool SentinelTransport::connected() const {
  return !closed_ && master_.get() != nullptr && master_.get()->connected();
}

size_t SentinelTransport::pending_commands() const {
  return waiters_.commands() +
         (master_.get() != nullptr ? master_.get()->pending_commands() : 0);
}

}  // namespace dlock
