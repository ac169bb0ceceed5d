#include "dlock/transport/uv/cluster_transport.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {

struct ClusterTransport::Request {
  std::vector<std::string> argv;
  absl::Time deadline;
  ReplyCallback callback;
  int slot = -1;  // -1: no key, any master
  int redirects = 0;
  std::string ask_target;  // non-empty: ASKING + argv there, once
  TimerId wait_timer = 0;  // while waiting for the first map
  std::string last_error;  // the last TRYAGAIN/CLUSTERDOWN, for the deadline
};

struct ClusterTransport::Sub {
  std::string channel;
  MessageCallback on_message;
  absl::AnyInvocable<void(absl::Status) &&> on_ready;  // null once run
  std::string node;
  std::unique_ptr<Subscription> inner;
};

class ClusterTransport::SubscriptionImpl : public Subscription {
 public:
  SubscriptionImpl(ClusterTransport* t, uint64_t id) : t_(t), life_(t->life_), id_(id) {}
  ~SubscriptionImpl() override {
    if (life_.expired()) return;
    auto it = t_->subs_.find(id_);
    if (it == t_->subs_.end()) return;
    std::unique_ptr<Sub> sub = std::move(it->second);
    t_->subs_.erase(it);
    // `sub` (and its inner subscription) goes here, maybe inside its own
    // on_message: the node transport allows that.
  }

 private:
  ClusterTransport* const t_;
  std::weak_ptr<int> life_;
  const uint64_t id_;
};

namespace {

bool IsKeyless(absl::string_view name) {
  static const char* const kKeyless[] = {
      "PING",   "INFO",    "TIME",   "CLUSTER", "ROLE",  "SCRIPT", "PUBLISH",
      "CONFIG", "DBSIZE",  "ECHO",   "AUTH",    "HELLO", "CLIENT", "COMMAND",
      "LASTSAVE", "MEMORY", "SLOWLOG", "LATENCY", "ACL", "FUNCTION", "WAIT",
      "READONLY", "READWRITE", "ASKING", "SPUBLISH"};
  for (const char* k : kKeyless) {
    if (absl::EqualsIgnoreCase(name, k)) return true;
  }
  return false;
}

std::string Address(absl::string_view host, int64_t port) {
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<ClusterEndpoint> ParseClusterEndpoint(absl::string_view address) {
  const size_t colon = address.rfind(':');
  ClusterEndpoint e;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &e.port) || e.port < 1 ||
      e.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster node address '", address, "' is not host:port"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  e.host = std::string(host);
  return e;
}

absl::StatusOr<int> ClusterTransport::SlotOfCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  const std::string& name = argv[0];
  if (absl::EqualsIgnoreCase(name, "EVAL") || absl::EqualsIgnoreCase(name, "EVALSHA") ||
      absl::EqualsIgnoreCase(name, "EVAL_RO") || absl::EqualsIgnoreCase(name, "EVALSHA_RO")) {
    int64_t numkeys = 0;
    if (argv.size() < 3 || !absl::SimpleAtoi(argv[2], &numkeys) || numkeys < 0 ||
        numkeys > static_cast<int64_t>(argv.size()) - 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": numkeys missing or larger than the arguments"));
    }
    if (numkeys == 0) return -1;
    const int slot = KeySlot(argv[3]);
    for (int64_t i = 1; i < numkeys; ++i) {
      if (KeySlot(argv[3 + i]) != slot) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": keys in different Redis Cluster slots (", argv[3], " in ", slot,
            ", ", argv[3 + i], " in ", KeySlot(argv[3 + i]),
            "); give them one hash tag"));
      }
    }
    return slot;
  }
  if (argv.size() < 2 || IsKeyless(name)) return -1;
  return KeySlot(argv[1]);
}

absl::StatusOr<std::unique_ptr<ClusterTransport>> ClusterTransport::Create(
    EventLoop* loop, ClusterTransportOptions options, ClusterNodeFactory factory,
    std::unique_ptr<EventLoop> owned_loop) {
  if (loop == nullptr) return absl::InvalidArgumentError("cluster: null event loop");
  if (!factory) return absl::InvalidArgumentError("cluster: null node factory");
  if (options.seeds.empty()) return absl::InvalidArgumentError("cluster: no seed node");
  for (const ClusterEndpoint& s : options.seeds) {
    if (s.host.empty() || s.port < 1 || s.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster: bad seed '", s.host, ":", s.port, "'"));
    }
  }
  if (options.topology_timeout <= absl::ZeroDuration() ||
      options.retry_delay <= absl::ZeroDuration() || options.max_redirects < 1) {
    return absl::InvalidArgumentError(
        "cluster: topology_timeout and retry_delay must be positive, max_redirects >= 1");
  }
  std::unique_ptr<ClusterTransport> t(new ClusterTransport(
      loop, std::move(options), std::move(factory), std::move(owned_loop)));
  t->Refresh();
  t->SchedulePeriodicRefresh();
  return t;
}

ClusterTransport::ClusterTransport(EventLoop* loop, ClusterTransportOptions options,
                                   ClusterNodeFactory factory,
                                   std::unique_ptr<EventLoop> owned_loop)
    : loop_(loop),
      owned_loop_(std::move(owned_loop)),
      options_(std::move(options)),
      factory_(std::move(factory)),
      slots_(kClusterSlots) {}

ClusterTransport::~ClusterTransport() {
  Close();
  // Node transports and subscriptions go before the loop they may use.
  subs_.clear();
  nodes_.clear();
}

Transport* ClusterTransport::Node(const std::string& address) {
  if (closed_) return nullptr;
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return it->second.get();
  absl::StatusOr<ClusterEndpoint> e = ParseClusterEndpoint(address);
  if (!e.ok()) {
    last_error_ = e.status();
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Transport>> node = factory_(e->host, e->port);
  if (!node.ok()) {
    last_error_ = node.status();
    return nullptr;
  }
  Transport* raw = node->get();
  nodes_[address] = *std::move(node);
  return raw;
}

std::string ClusterTransport::OwnerOf(int slot) const {
  if (slot < 0 || slot >= kClusterSlots) return "";
  return slots_[slot];
}

std::vector<std::string> ClusterTransport::Masters() const {
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& s : slots_) {
    if (!s.empty() && seen.insert(s).second) out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Commands --------------------------------------------------------------

absl::Status ClusterTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                                    ReplyCallback callback) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!callback) return absl::InvalidArgumentError("null callback");
  for (const char* banned : {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE",
                             "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR", "ASKING",
                             "SELECT"}) {
    if (absl::EqualsIgnoreCase(argv[0], banned)) {
      return absl::InvalidArgumentError(
          absl::StrCat(argv[0], " is not sent through a cluster transport"));
    }
  }
  absl::StatusOr<int> slot = SlotOfCommand(argv);
  if (!slot.ok()) return slot.status();
  const uint64_t id = next_id_++;
  auto r = std::make_unique<Request>();
  r->argv = std::move(argv);
  r->deadline = loop_->Now() + timeout;
  r->callback = std::move(callback);
  r->slot = *slot;
  Request& req = *r;
  requests_[id] = std::move(r);
  if (!map_loaded_) {
    waiting_for_map_.push_back(id);
    req.wait_timer = loop_->RunAfter(timeout, [this, life = std::weak_ptr<int>(life_), id] {
      if (life.expired() || closed_) return;
      auto it = requests_.find(id);
      if (it == requests_.end()) return;
      it->second->wait_timer = 0;
      waiting_for_map_.erase(
          std::remove(waiting_for_map_.begin(), waiting_for_map_.end(), id),
          waiting_for_map_.end());
      Finish(id, absl::DeadlineExceededError(absl::StrCat(
                     "cluster slot map not loaded in time",
                     last_error_.ok() ? "" : ": ", last_error_.message())));
    });
    Refresh();
    return absl::OkStatus();
  }
  Dispatch(id);
  return absl::OkStatus();
}

void ClusterTransport::Dispatch(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  const absl::Duration remaining = r.deadline - loop_->Now();
  if (remaining <= absl::ZeroDuration()) {
    FinishLater(id, absl::DeadlineExceededError(absl::StrCat(
                        "cluster command deadline passed",
                        r.last_error.empty() ? "" : " (last reply: ", r.last_error,
                        r.last_error.empty() ? "" : ")")));
    return;
  }
  std::string address = r.ask_target;
  const bool asking = !address.empty();
  r.ask_target.clear();
  if (!asking) {
    if (r.slot >= 0) {
      address = slots_[r.slot];
    } else {
      // No key: any master, a connected one first (a dead master keeps its
      // slots in the map until the cluster fails it over).
      for (const std::string& m : Masters()) {
        auto node = nodes_.find(m);
        if (address.empty()) address = m;
        if (node != nodes_.end() && node->second->connected()) {
          address = m;
          break;
        }
      }
    }
  }
  if (address.empty()) {
    // The map names no owner (a failover under way): ask again, until the
    // deadline.
    Refresh();
    r.last_error = absl::StrCat("no node serves slot ", r.slot);
    RetryLater(id);
    return;
  }
  Transport* node = Node(address);
  if (node == nullptr) {
    Refresh();  // the map may name a node that is gone
    FinishLater(id, absl::UnavailableError(absl::StrCat(
                        "cluster: cannot reach ", address, ": ", last_error_.message())));
    return;
  }
  if (asking) {
    // ASKING applies to the next command on this connection, which is ours:
    // both go out in order on the node's one command connection.
    node->Send({"ASKING"}, remaining, [](absl::StatusOr<Reply>) {}).IgnoreError();
  }
  absl::Status s = node->Send(r.argv, remaining,
                              [this, life = std::weak_ptr<int>(life_), id](
                                  absl::StatusOr<Reply> reply) {
                                if (life.expired() || closed_) return;
                                OnNodeReply(id, std::move(reply));
                              });
  if (!s.ok()) FinishLater(id, s);
}

void ClusterTransport::OnNodeReply(uint64_t id, absl::StatusOr<Reply> reply) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  if (!reply.ok()) {
    if (absl::IsUnavailable(reply.status())) Refresh();  // a node went away?
    Finish(id, std::move(reply));
    return;
  }
  if (reply->type != Reply::Type::kError) {
    Finish(id, std::move(reply));
    return;
  }
  const std::string& text = reply->str;
  const bool moved = absl::StartsWith(text, "MOVED ");
  const bool ask = absl::StartsWith(text, "ASK ");
  const bool again = absl::StartsWith(text, "TRYAGAIN") || absl::StartsWith(text, "CLUSTERDOWN");
  if (!moved && !ask && !again) {
    Finish(id, std::move(reply));
    return;
  }
  if (again) {
    // A migration or failover under way: ask again until the deadline.
    if (absl::StartsWith(text, "CLUSTERDOWN")) Refresh();
    r.last_error = text;
    RetryLater(id);
    return;
  }
  if (moved && ++r.redirects > options_.max_redirects) {
    Finish(id, std::move(reply));
    return;
  }
  // "MOVED <slot> <host:port>" / "ASK <slot> <host:port>".
  std::vector<absl::string_view> f = absl::StrSplit(text, ' ');
  int slot = -1;
  if (f.size() != 3 || !absl::SimpleAtoi(f[1], &slot) || slot < 0 || slot >= kClusterSlots ||
      !ParseClusterEndpoint(f[2]).ok()) {
    Finish(id, std::move(reply));
    return;
  }
  std::string target(f[2]);
  if (absl::StartsWith(target, ":")) target = "127.0.0.1" + target;  // no announced host
  if (moved) {
    ++moved_;
    slots_[slot] = target;
    Refresh();
  } else {
    ++ask_;
    r.ask_target = target;
  }
  Dispatch(id);
}

void ClusterTransport::Finish(uint64_t id, absl::StatusOr<Reply> result) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  if (r->wait_timer != 0) loop_->Cancel(r->wait_timer);
  // May destroy this transport: nothing after it.
  std::move(r->callback)(std::move(result));
}

void ClusterTransport::FinishLater(uint64_t id, absl::Status status) {
  auto timer = std::make_shared<TimerId>(0);
  *timer = loop_->RunAfter(absl::ZeroDuration(), [this, life = std::weak_ptr<int>(life_), id,
                                                   status = std::move(status), timer] {
    if (life.expired()) return;
    timers_.erase(std::remove(timers_.begin(), timers_.end(), *timer), timers_.end());
    if (closed_) return;
    Finish(id, status);
  });
  timers_.push_back(*timer);
}

void ClusterTransport::RetryLater(uint64_t id) {
  auto timer = std::make_shared<TimerId>(0);
  *timer = loop_->RunAfter(options_.retry_delay,
                           [this, life = std::weak_ptr<int>(life_), id, timer] {
                             if (life.expired()) return;
                             timers_.erase(
                                 std::remove(timers_.begin(), timers_.end(), *timer),
                                 timers_.end());
                             if (closed_) return;
                             Dispatch(id);
                           });
  timers_.push_back(*timer);
}

// ---- Topology --------------------------------------------------------------

std::vector<std::string> ClusterTransport::Candidates() const {
  std::vector<std::string> out = Masters();
  absl::flat_hash_set<std::string> seen(out.begin(), out.end());
  for (const auto& [address, node] : nodes_) {
    if (seen.insert(address).second) out.push_back(address);
  }
  for (const ClusterEndpoint& s : options_.seeds) {
    std::string a = Address(s.host, s.port);
    if (seen.insert(a).second) out.push_back(a);
  }
  return out;
}

void ClusterTransport::Refresh() {
  if (refreshing_ || closed_) return;
  refreshing_ = true;
  candidates_ = Candidates();
  AskForSlots(0);
}

void ClusterTransport::AskForSlots(size_t candidate) {
  for (; candidate < candidates_.size(); ++candidate) {
    Transport* node = Node(candidates_[candidate]);
    if (node == nullptr) continue;
    absl::Status s = node->Send(
        {"CLUSTER", "SLOTS"}, options_.topology_timeout,
        [this, life = std::weak_ptr<int>(life_), candidate](absl::StatusOr<Reply> reply) {
          if (life.expired() || closed_) return;
          OnSlots(candidate, std::move(reply));
        });
    if (s.ok()) return;
    last_error_ = s;
  }
  TopologyFailed(last_error_.ok() ? absl::UnavailableError("no cluster node to ask")
                                  : last_error_);
}

void ClusterTransport::OnSlots(size_t candidate, absl::StatusOr<Reply> reply) {
  const std::string& asked = candidates_[candidate];
  if (!reply.ok()) {
    last_error_ = absl::UnavailableError(
        absl::StrCat("CLUSTER SLOTS on ", asked, ": ", reply.status().message()));
  } else if (!reply->is_array() || reply->elements.empty()) {
    last_error_ = absl::UnavailableError(absl::StrCat(
        "CLUSTER SLOTS on ", asked, ": ",
        reply->type == Reply::Type::kError ? reply->str : "no slots assigned"));
  } else {
    absl::StatusOr<ClusterEndpoint> e = ParseClusterEndpoint(asked);
    ApplySlots(*reply, e.ok() ? e->host : "");
    // Connect to every master now, not on its first command.
    for (const std::string& m : Masters()) Node(m);
    refreshing_ = false;
    map_loaded_ = true;
    ++topology_loads_;
    last_error_ = absl::OkStatus();
    std::vector<uint64_t> waiting;
    waiting.swap(waiting_for_map_);
    for (uint64_t id : waiting) {
      auto it = requests_.find(id);
      if (it == requests_.end()) continue;
      if (it->second->wait_timer != 0) loop_->Cancel(it->second->wait_timer);
      it->second->wait_timer = 0;
      Dispatch(id);
    }
    std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
    waiters.swap(connect_waiters_);
    for (auto& w : waiters) {
      loop_->RunAfter(absl::ZeroDuration(),
                      [life = std::weak_ptr<int>(life_), w = std::move(w)]() mutable {
                        if (!life.expired()) std::move(w)(absl::OkStatus());
                      });
    }
    PlaceSubscriptions();
    PruneNodes();
    return;
  }
  AskForSlots(candidate + 1);
}

void ClusterTransport::PruneNodes() {
  const std::vector<std::string> masters = Masters();
  std::vector<std::string> gone;
  for (const auto& [address, node] : nodes_) {
    if (std::find(masters.begin(), masters.end(), address) != masters.end()) continue;
    if (node->pending_commands() > 0) continue;  // its callbacks are still due
    bool hosts_subscription = false;
    for (const auto& [id, sub] : subs_) hosts_subscription |= sub->node == address;
    if (!hosts_subscription) gone.push_back(address);
  }
  // Destroying a node transport inside its own callback is allowed (we may
  // be in the reply to the CLUSTER SLOTS it carried).
  for (const std::string& address : gone) nodes_.erase(address);
}

void ClusterTransport::ApplySlots(const Reply& reply, const std::string& asked_host) {
  std::vector<std::string> slots(kClusterSlots);
  for (const Reply& range : reply.elements) {
    if (range.elements.size() < 3 || !range.elements[0].is_integer() ||
        !range.elements[1].is_integer() || range.elements[2].elements.size() < 2) {
      continue;
    }
    const Reply& master = range.elements[2];
    std::string host = master.elements[0].str;
    if (host.empty() || host == "?") host = asked_host;
    const std::string address = Address(host, master.elements[1].integer);
    const int64_t from = std::max<int64_t>(0, range.elements[0].integer);
    const int64_t to = std::min<int64_t>(kClusterSlots - 1, range.elements[1].integer);
    for (int64_t s = from; s <= to; ++s) slots[s] = address;
  }
  slots_ = std::move(slots);
}

void ClusterTransport::TopologyFailed(absl::Status why) {
  refreshing_ = false;
  if (map_loaded_) return;  // keep routing by the old map
  // No map at all: the commands waiting for one fail now.
  std::vector<uint64_t> waiting;
  waiting.swap(waiting_for_map_);
  const absl::Status status = absl::UnavailableError(
      absl::StrCat("cluster slot map unavailable: ", why.message()));
  for (uint64_t id : waiting) FinishLater(id, status);
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  for (auto& w : waiters) {
    loop_->RunAfter(absl::ZeroDuration(),
                    [life = std::weak_ptr<int>(life_), w = std::move(w), status]() mutable {
                      if (!life.expired()) std::move(w)(status);
                    });
  }
}

void ClusterTransport::SchedulePeriodicRefresh() {
  if (options_.refresh_interval <= absl::ZeroDuration() || closed_) return;
  refresh_timer_ = loop_->RunAfter(options_.refresh_interval,
                                   [this, life = std::weak_ptr<int>(life_)] {
                                     if (life.expired() || closed_) return;
                                     refresh_timer_ = 0;
                                     Refresh();
                                     SchedulePeriodicRefresh();
                                   });
}

absl::Status ClusterTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (map_loaded_) {
    loop_->RunAfter(absl::ZeroDuration(),
                    [life = std::weak_ptr<int>(life_), cb = std::move(callback)]() mutable {
                      if (!life.expired()) std::move(cb)(absl::OkStatus());
                    });
    return absl::OkStatus();
  }
  connect_waiters_.push_back(std::move(callback));
  Refresh();
  return absl::OkStatus();
}

// ---- Pub/sub ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Subscription>> ClusterTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  const uint64_t id = next_sub_id_++;
  auto sub = std::make_unique<Sub>();
  sub->channel = std::move(channel);
  sub->on_message = std::move(on_message);
  sub->on_ready = std::move(on_ready);
  Sub& s = *sub;
  subs_[id] = std::move(sub);
  PlaceSubscription(s);
  return std::unique_ptr<Subscription>(new SubscriptionImpl(this, id));
}

void ClusterTransport::PlaceSubscriptions() {
  const std::vector<std::string> masters = Masters();
  for (auto& [id, sub] : subs_) {
    if (sub->inner == nullptr ||
        std::find(masters.begin(), masters.end(), sub->node) == masters.end()) {
      PlaceSubscription(*sub);
    }
  }
}

void ClusterTransport::PlaceSubscription(Sub& sub) {
  std::string address = slots_[KeySlot(sub.channel)];
  if (address.empty()) {
    const std::vector<std::string> c = Candidates();
    if (!c.empty()) address = c.front();
  }
  sub.inner.reset();
  sub.node = address;
  Transport* node = Node(address);
  absl::Status failure = absl::UnavailableError(
      absl::StrCat("cluster: cannot reach ", address, ": ", last_error_.message()));
  if (node != nullptr) {
    Sub* raw = &sub;
    absl::StatusOr<std::unique_ptr<Subscription>> inner = node->Subscribe(
        sub.channel,
        [raw](absl::string_view channel, absl::string_view message) {
          // `raw` lives as long as `inner`, which this callback belongs to.
          raw->on_message(channel, message);
        },
        [raw](absl::Status s) {
          auto on_ready = std::move(raw->on_ready);
          raw->on_ready = nullptr;
          if (on_ready) std::move(on_ready)(std::move(s));  // may free `raw`
        });
    if (inner.ok()) {
      sub.inner = *std::move(inner);
      return;
    }
    failure = inner.status();
  }
  if (sub.on_ready) {
    auto on_ready = std::move(sub.on_ready);
    sub.on_ready = nullptr;
    loop_->RunAfter(absl::ZeroDuration(),
                    [life = std::weak_ptr<int>(life_), on_ready = std::move(on_ready),
                     failure]() mutable {
                      if (!life.expired()) std::move(on_ready)(failure);
                    });
  }
}

// ---- Close -----------------------------------------------------------------

void ClusterTransport::Close() {
  if (closed_) return;
  closed_ = true;
  if (refresh_timer_ != 0) loop_->Cancel(refresh_timer_);
  refresh_timer_ = 0;
  for (TimerId t : timers_) loop_->Cancel(t);
  timers_.clear();
  for (auto& [id, r] : requests_) {
    if (r->wait_timer != 0) loop_->Cancel(r->wait_timer);
    r->wait_timer = 0;
  }
  std::weak_ptr<int> life = life_;
  // Node transports fail their own pending callbacks; ours ignore them
  // (closed_).
  for (auto& [id, sub] : subs_) sub->inner.reset();
  for (auto& [address, node] : nodes_) node->Close();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> ready;
  for (auto& [id, sub] : subs_) {
    if (sub->on_ready) ready.push_back(std::move(sub->on_ready));
    sub->on_ready = nullptr;
  }
  absl::flat_hash_map<uint64_t, std::unique_ptr<Request>> requests;
  requests.swap(requests_);
  waiting_for_map_.clear();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  const absl::Status cancelled = absl::CancelledError("cluster transport closed");
  for (auto& [id, r] : requests) std::move(r->callback)(cancelled);
  for (auto& w : waiters) std::move(w)(cancelled);
  for (auto& w : ready) std::move(w)(cancelled);
  (void)life;
}

}  // namespace dlock
