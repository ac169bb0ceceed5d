#include "dlock/transport/uv/sentinel_transport.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/uv/tls_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {
namespace {

constexpr absl::Duration kBackoffMin = absl::Milliseconds(200);
constexpr absl::Duration kBackoffMax = absl::Seconds(2);

std::string HostPort(absl::string_view host, int port) {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

}  // namespace

struct SentinelTransport::SubRecord {
  std::string channel;
  // Shared so that a message callback that destroys its own subscription
  // does not destroy the callable it is running in.
  std::shared_ptr<MessageCallback> on_message;
  absl::AnyInvocable<void(absl::Status) &&> on_ready;
  std::unique_ptr<Subscription> inner;
};

class SentinelTransport::SubscriptionImpl : public Subscription {
 public:
  SubscriptionImpl(SentinelTransport* owner, uint64_t id)
      : owner_(owner), life_(owner->life_), id_(id) {}
  ~SubscriptionImpl() override {
    if (!life_.expired()) owner_->subs_.erase(id_);
  }

 private:
  SentinelTransport* owner_;
  std::weak_ptr<int> life_;
  uint64_t id_;
};

absl::StatusOr<std::unique_ptr<SentinelTransport>> SentinelTransport::Create(
    uv_loop_s* loop, SentinelTransportOptions options) {
  auto owned = std::make_unique<UvEventLoop>(loop);
  const HiredisTransportOptions master = options.master;
  const bool tls = options.tls;
  const TlsOptions tls_options = options.tls_options;
  HiredisTransportOptions sentinel = options.master;
  sentinel.username = options.sentinel_username;
  sentinel.password = options.sentinel_password;
  sentinel.db = 0;
  sentinel.unix_socket.clear();
  ConnectionFactory factory =
      [loop, master, sentinel, tls, tls_options](
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
      factory_(std::move(factory)) {}

SentinelTransport::~SentinelTransport() {
  Close();
  life_.reset();
}

absl::Status SentinelTransport::Start() {
  if (options_.sentinels.empty()) {
    return absl::InvalidArgumentError("Sentinel: at least one sentinel is needed");
  }
  if (options_.master_name.empty()) {
    return absl::InvalidArgumentError("Sentinel: the master name must not be empty");
  }
  if (options_.query_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("Sentinel: query_timeout must be positive");
  }
  HiredisTransportOptions check = options_.master;
  check.unix_socket.clear();
  check.host = "master";
  check.port = 6379;
  absl::Status s = ValidateConnectionOptions(check);
  if (!s.ok()) return s;
  std::weak_ptr<int> life = life_;
  for (const SentinelTransportOptions::Endpoint& e : options_.sentinels) {
    if (e.host.empty() || e.port < 1 || e.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sentinel: bad sentinel address ", HostPort(e.host, e.port)));
    }
    absl::StatusOr<std::unique_ptr<Transport>> c = factory_(e.host, e.port, true);
    if (!c.ok()) return c.status();
    sentinels_.push_back(*std::move(c));
    // Failover notices. A sentinel that cannot be reached now is
    // resubscribed by its transport when it comes back.
    absl::StatusOr<std::unique_ptr<Subscription>> sub = sentinels_.back()->Subscribe(
        "+switch-master",
        [this, life](absl::string_view, absl::string_view message) {
          if (life.expired() || closed_) return;
          OnSwitchMessage(message);
        },
        [](absl::Status) {});
    if (sub.ok()) switch_subs_.push_back(*std::move(sub));
  }
  Discover();
  return absl::OkStatus();
}

// ---- Discovery --------------------------------------------------------------

void SentinelTransport::Discover() {
  if (closed_) return;
  if (discovering_) {
    again_ = true;
    return;
  }
  discovering_ = true;
  again_ = false;
  round_errors_.clear();
  if (retry_timer_ != 0) {
    loop_->Cancel(retry_timer_);
    retry_timer_ = 0;
  }
  AskSentinel(0);
}

void SentinelTransport::NoteRoundError(size_t index, absl::string_view what) {
  const SentinelTransportOptions::Endpoint& e = options_.sentinels[index];
  absl::StrAppend(&round_errors_, round_errors_.empty() ? "" : "; ", "sentinel ",
                  HostPort(e.host, e.port), ": ", what);
}

void SentinelTransport::AskSentinel(size_t index) {
  if (index >= sentinels_.size()) {
    RoundFailed();
    return;
  }
  std::weak_ptr<int> life = life_;
  absl::Status s = sentinels_[index]->Send(
      {"SENTINEL", "get-master-addr-by-name", options_.master_name},
      options_.query_timeout, [this, life, index](absl::StatusOr<Reply> reply) {
        if (life.expired() || closed_) return;
        OnSentinelAnswer(index, std::move(reply));
      });
  if (!s.ok()) {
    NoteRoundError(index, s.ToString());
    AskSentinel(index + 1);
  }
}

void SentinelTransport::OnSentinelAnswer(size_t index, absl::StatusOr<Reply> reply) {
  if (!reply.ok()) {
    NoteRoundError(index, reply.status().ToString());
  } else if (reply->is_nil()) {
    NoteRoundError(index, absl::StrCat("knows no master named '", options_.master_name,
                                       "'"));
  } else if (reply->is_error()) {
    NoteRoundError(index, reply->str);
  } else if (reply->is_array() && reply->elements.size() == 2 &&
             reply->elements[0].is_string() && reply->elements[1].is_string()) {
    int port = 0;
    if (absl::SimpleAtoi(reply->elements[1].str, &port) && port >= 1 && port <= 65535) {
      CheckRole(index, reply->elements[0].str, port);
      return;
    }
    NoteRoundError(index, absl::StrCat("bad port in reply: ", reply->DebugString()));
  } else {
    NoteRoundError(index, absl::StrCat("unexpected reply: ", reply->DebugString()));
  }
  AskSentinel(index + 1);
}

void SentinelTransport::CheckRole(size_t index, std::string host, int port) {
  const bool same = master_ != nullptr && host == master_host_ && port == master_port_;
  Transport* target = master_.get();
  if (!same) {
    absl::StatusOr<std::unique_ptr<Transport>> c = factory_(host, port, false);
    if (!c.ok()) {
      NoteRoundError(index, absl::StrCat("names ", HostPort(host, port), ": ",
                                         c.status().ToString()));
      AskSentinel(index + 1);
      return;
    }
    candidate_ = *std::move(c);
    target = candidate_.get();
  }
  std::weak_ptr<int> life = life_;
  absl::Status s = target->Send(
      {"ROLE"}, options_.query_timeout,
      [this, life, index, host, port, same](absl::StatusOr<Reply> reply) {
        if (life.expired() || closed_) return;
        OnRole(index, host, port, same, std::move(reply));
      });
  if (!s.ok()) {
    NoteRoundError(index, absl::StrCat("names ", HostPort(host, port), ", ROLE: ",
                                       s.ToString()));
    if (!same) Bury(std::move(candidate_));
    AskSentinel(index + 1);
  }
}

void SentinelTransport::OnRole(size_t index, std::string host, int port, bool same,
                               absl::StatusOr<Reply> reply) {
  const bool is_master = reply.ok() && reply->is_array() && !reply->elements.empty() &&
                         (reply->elements[0].is_string() || reply->elements[0].is_status()) &&
                         reply->elements[0].str == "master";
  if (is_master) {
    if (same) {
      ConfirmMaster();
    } else {
      Install(std::move(candidate_), std::move(host), port);
    }
    return;
  }
  std::string role;
  if (!reply.ok()) {
    role = reply.status().ToString();
  } else if (reply->is_array() && !reply->elements.empty()) {
    role = absl::StrCat("ROLE says ", reply->elements[0].str);
  } else {
    role = absl::StrCat("unexpected ROLE reply ", reply->DebugString());
  }
  NoteRoundError(index, absl::StrCat("names ", HostPort(host, port),
                                     ", not a master: ", role));
  std::weak_ptr<int> life = life_;
  if (same && reply.ok()) {
    // Our master was demoted: never send it another write.
    ++generation_;
    std::unique_ptr<Transport> old = std::move(master_);
    master_host_.clear();
    master_port_ = 0;
    for (auto& [id, record] : subs_) record->inner.reset();
    Bury(std::move(old));
    if (life.expired()) return;
  } else if (!same) {
    Bury(std::move(candidate_));
    if (life.expired()) return;
  }
  AskSentinel(index + 1);
}

void SentinelTransport::Install(std::unique_ptr<Transport> master, std::string host,
                                int port) {
  ++generation_;
  std::unique_ptr<Transport> old = std::move(master_);
  master_ = std::move(master);
  master_host_ = std::move(host);
  master_port_ = port;
  for (auto& [id, record] : subs_) {
    record->inner.reset();
    SubscribeOnMaster(*record);
  }
  std::weak_ptr<int> life = life_;
  if (old != nullptr) {
    // Its commands in flight fail with kUnavailable (see Send).
    Bury(std::move(old));
    if (life.expired()) return;
  }
  ConfirmMaster();
}

void SentinelTransport::ConfirmMaster() {
  discovering_ = false;
  backoff_ = absl::ZeroDuration();
  last_error_ = absl::OkStatus();
  std::weak_ptr<int> life = life_;
  // Commands that waited for a master go out now, in the order sent.
  std::map<uint64_t, Waiting> waiting;
  waiting.swap(waiting_);
  for (auto& [id, w] : waiting) {
    loop_->Cancel(w.timer);
    // Held here too: a rejected Send destroys the callback it was given.
    auto holder = std::make_shared<ReplyCallback>(std::move(w.callback));
    absl::Status s = Send(std::move(w.argv), w.timeout,
                          [holder](absl::StatusOr<Reply> reply) {
                            std::move(*holder)(std::move(reply));
                          });
    if (!s.ok() && *holder) {
      std::move(*holder)(s);
      if (life.expired()) return;
    }
  }
  FireConnectWaiters(absl::OkStatus());
  if (life.expired() || closed_) return;
  if (again_) Discover();
}

void SentinelTransport::FailWaiting(const absl::Status& why) {
  std::map<uint64_t, Waiting> waiting;
  waiting.swap(waiting_);
  std::weak_ptr<int> life = life_;
  for (auto& [id, w] : waiting) {
    loop_->Cancel(w.timer);
    std::move(w.callback)(why);
    if (life.expired()) return;
  }
}

void SentinelTransport::RoundFailed() {
  discovering_ = false;
  last_error_ = absl::UnavailableError(absl::StrCat(
      "Sentinel: no master found for '", options_.master_name, "' (", round_errors_, ")"));
  if (master_ == nullptr || again_) {
    backoff_ = backoff_ == absl::ZeroDuration() ? kBackoffMin
                                                : std::min(backoff_ * 2, kBackoffMax);
    retry_timer_ = loop_->RunAfter(backoff_, [this] {
      retry_timer_ = 0;
      Discover();
    });
  }
  again_ = false;
  std::weak_ptr<int> life = life_;
  FireConnectWaiters(last_error_);
  if (life.expired() || closed_) return;
  if (master_ != nullptr) return;
  FailWaiting(last_error_);
  if (life.expired() || closed_) return;
  // Subscriptions still waiting for a first master learn why there is none.
  std::vector<uint64_t> waiting;
  for (auto& [id, record] : subs_) {
    if (record->on_ready && record->inner == nullptr) waiting.push_back(id);
  }
  for (uint64_t id : waiting) {
    auto it = subs_.find(id);
    if (it == subs_.end() || !it->second->on_ready) continue;
    auto ready = std::move(it->second->on_ready);
    it->second->on_ready = nullptr;
    std::move(ready)(last_error_);
    if (life.expired() || closed_) return;
  }
}

void SentinelTransport::FireConnectWaiters(const absl::Status& status) {
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  std::weak_ptr<int> life = life_;
  for (auto& w : waiters) {
    std::move(w)(status);
    if (life.expired()) return;
  }
}

void SentinelTransport::OnSwitchMessage(absl::string_view message) {
  // "<name> <old-ip> <old-port> <new-ip> <new-port>"
  std::vector<absl::string_view> parts = absl::StrSplit(message, ' ');
  if (parts.empty() || parts[0] != options_.master_name) return;
  Discover();
}

void SentinelTransport::Bury(std::unique_ptr<Transport> transport) {
  if (transport == nullptr) return;
  std::weak_ptr<int> life = life_;
  transport->Close();
  if (life.expired()) return;
  graveyard_.push_back(std::move(transport));
  if (graveyard_timer_ == 0) {
    graveyard_timer_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
      graveyard_timer_ = 0;
      graveyard_.clear();
    });
  }
}

// ---- Commands and subscriptions ---------------------------------------------

absl::Status SentinelTransport::Send(std::vector<std::string> argv,
                                     absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  absl::Status s = ValidateSendArguments(argv, timeout, callback != nullptr);
  if (!s.ok()) return s;
  if (master_ == nullptr) {
    // Waits for the discovery round (bounded by `timeout`), as a command
    // waits for a connection being made.
    Discover();
    const uint64_t id = next_waiting_++;
    TimerId timer = loop_->RunAfter(timeout, [this, id, timeout] {
      auto it = waiting_.find(id);
      if (it == waiting_.end()) return;
      ReplyCallback cb = std::move(it->second.callback);
      waiting_.erase(it);
      std::move(cb)(absl::DeadlineExceededError(absl::StrCat(
          "Sentinel: no master found for '", options_.master_name, "' within ",
          absl::FormatDuration(timeout),
          last_error_.ok() ? "" : absl::StrCat(" (", last_error_.message(), ")"))));
    });
    waiting_.emplace(id, Waiting{std::move(argv), timeout, std::move(callback), timer});
    return absl::OkStatus();
  }
  const uint64_t generation = generation_;
  std::weak_ptr<int> life = life_;
  return master_->Send(
      std::move(argv), timeout,
      [this, life, generation,
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        if (!life.expired() && !closed_) {
          if (generation != generation_) {
            // Never re-sent: a lock script run again on the new master is
            // not the same outcome.
            reply = absl::UnavailableError(
                "Sentinel: the master changed while this command was in flight "
                "(it may or may not have run on the old master)");
          } else if ((reply.ok() && reply->is_error() &&
                      absl::StartsWith(reply->str, "READONLY")) ||
                     (!reply.ok() && absl::IsUnavailable(reply.status()))) {
            Discover();  // a replica answered, or the connection was lost
          }
        }
        std::move(callback)(std::move(reply));
      });
}

void SentinelTransport::SubscribeOnMaster(SubRecord& record) {
  std::shared_ptr<MessageCallback> on_message = record.on_message;
  std::weak_ptr<int> life = life_;
  uint64_t id = 0;
  for (auto& [key, value] : subs_) {
    if (value.get() == &record) id = key;
  }
  absl::StatusOr<std::unique_ptr<Subscription>> sub = master_->Subscribe(
      record.channel,
      [on_message](absl::string_view channel, absl::string_view message) {
        std::shared_ptr<MessageCallback> keep = on_message;
        (*keep)(channel, message);
      },
      [this, life, id](absl::Status status) {
        if (life.expired() || closed_) return;
        auto it = subs_.find(id);
        if (it == subs_.end() || !it->second->on_ready) return;
        auto ready = std::move(it->second->on_ready);
        it->second->on_ready = nullptr;
        std::move(ready)(std::move(status));
      });
  if (sub.ok()) record.inner = *std::move(sub);
}

absl::StatusOr<std::unique_ptr<Subscription>> SentinelTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  if (!on_message) return absl::InvalidArgumentError("on_message must not be null");
  const uint64_t id = next_sub_++;
  auto record = std::make_unique<SubRecord>();
  record->channel = std::move(channel);
  record->on_message = std::make_shared<MessageCallback>(std::move(on_message));
  record->on_ready = std::move(on_ready);
  SubRecord& r = *record;
  subs_.emplace(id, std::move(record));
  if (master_ != nullptr) {
    SubscribeOnMaster(r);
  } else {
    Discover();
  }
  return std::unique_ptr<Subscription>(new SubscriptionImpl(this, id));
}

// ---- Lifecycle --------------------------------------------------------------

absl::Status SentinelTransport::Connect(
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("Sentinel transport closed");
  connect_waiters_.push_back(std::move(callback));
  if (master_ != nullptr && master_->connected() && !discovering_) {
    // Answered on a later turn (never inside this call).
    if (retry_ready_timer_ != 0) return absl::OkStatus();
    retry_ready_timer_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
      retry_ready_timer_ = 0;
      if (master_ != nullptr && master_->connected()) {
        FireConnectWaiters(absl::OkStatus());
      } else {
        Discover();
      }
    });
  } else {
    Discover();
  }
  return absl::OkStatus();
}

void SentinelTransport::Close() {
  if (closed_) return;
  closed_ = true;
  for (TimerId* t : {&retry_timer_, &graveyard_timer_, &retry_ready_timer_}) {
    if (*t != 0) loop_->Cancel(*t);
    *t = 0;
  }
  std::weak_ptr<int> life = life_;
  FireConnectWaiters(absl::CancelledError("Sentinel transport closed"));
  if (life.expired()) return;
  FailWaiting(absl::CancelledError("Sentinel transport closed"));
  if (life.expired()) return;
  switch_subs_.clear();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> ready;
  for (auto& [id, record] : subs_) {
    record->inner.reset();
    if (record->on_ready) ready.push_back(std::move(record->on_ready));
    record->on_ready = nullptr;
  }
  for (auto& r : ready) {
    std::move(r)(absl::CancelledError("Sentinel transport closed"));
    if (life.expired()) return;
  }
  if (master_ != nullptr) master_->Close();
  if (life.expired()) return;
  if (candidate_ != nullptr) candidate_->Close();
  for (auto& s : sentinels_) s->Close();
  for (auto& g : graveyard_) g->Close();
}

bool SentinelTransport::connected() const {
  return !closed_ && master_ != nullptr && master_->connected();
}

size_t SentinelTransport::pending_commands() const {
  return waiting_.size() + (master_ != nullptr ? master_->pending_commands() : 0);
}

uint64_t SentinelTransport::connection_epoch() const {
  if (closed_ || master_ == nullptr) return 0;
  const uint64_t inner = master_->connection_epoch();
  if (inner == 0) return 0;
  return (generation_ << 32) | (inner & 0xffffffffu);
}

std::string SentinelTransport::master_address() const {
  return master_ == nullptr ? "" : HostPort(master_host_, master_port_);
}

}  // namespace dlock
