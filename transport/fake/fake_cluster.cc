#include "dlock/transport/fake/fake_cluster.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

// The keys that route a command: every KEYS entry of EVAL/EVALSHA, else
// argv[1] for a keyed command; none for the keyless ones a lock uses.
std::vector<std::string> RoutingKeys(const std::vector<std::string>& argv) {
  const std::string& name = argv[0];
  if (absl::EqualsIgnoreCase(name, "EVAL") || absl::EqualsIgnoreCase(name, "EVALSHA")) {
    int64_t n = 0;
    if (argv.size() < 3 || !absl::SimpleAtoi(argv[2], &n) || n < 0 ||
        n > static_cast<int64_t>(argv.size()) - 3) {
      return {};
    }
    return std::vector<std::string>(argv.begin() + 3, argv.begin() + 3 + n);
  }
  for (const char* keyless : {"PING", "INFO", "TIME", "SCRIPT", "PUBLISH", "DBSIZE", "ECHO",
                              "FLUSHALL", "CLUSTER"}) {
    if (absl::EqualsIgnoreCase(name, keyless)) return {};
  }
  if (argv.size() < 2) return {};
  return {argv[1]};
}

int PortOf(const std::string& address) {
  int port = 0;
  return absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port) ? port : 0;
}

}  // namespace

FakeCluster::FakeCluster(EventLoop* loop, int nodes) : loop_(loop), owner_(kClusterSlots) {
  for (int i = 0; i < nodes; ++i) {
    const std::string address = absl::StrCat("node", i, ":", 7000 + i);
    nodes_[address] = std::make_unique<FakeRedis>(loop);
    Assign(i * kClusterSlots / nodes, (i + 1) * kClusterSlots / nodes - 1, address);
  }
}

FakeCluster::~FakeCluster() {
  for (FakeClusterConnection* c : connections_) c->cluster_ = nullptr;
}

std::vector<std::string> FakeCluster::addresses() const {
  std::vector<std::string> out;
  for (const auto& [address, node] : nodes_) out.push_back(address);
  std::sort(out.begin(), out.end());
  return out;
}

FakeRedis* FakeCluster::node(const std::string& address) {
  auto it = nodes_.find(address);
  return it == nodes_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::unique_ptr<Transport>> FakeCluster::Connect(const std::string& address) {
  FakeRedis* server = node(address);
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrCat("no fake cluster node at ", address));
  }
  auto c = std::make_unique<FakeClusterConnection>(this, address, server);
  connections_.push_back(c.get());
  return std::unique_ptr<Transport>(std::move(c));
}

void FakeCluster::Assign(int first_slot, int last_slot, const std::string& address) {
  for (int s = first_slot; s <= last_slot; ++s) owner_[s] = address;
}

void FakeCluster::BeginMigration(int slot, const std::string& to) {
  migrating_[slot] = Migration{to};
}

void FakeCluster::MoveKey(const std::string& key) {
  const int slot = KeySlot(key);
  auto m = migrating_.find(slot);
  FakeRedis* from = node(owner_[slot]);
  FakeRedis* to = m == migrating_.end() ? nullptr : node(m->second.to);
  if (from == nullptr || to == nullptr) return;
  const Reply type = from->Execute({"TYPE", key});
  const Reply pttl = from->Execute({"PTTL", key});
  if (type.str == "string") {
    to->Execute({"SET", key, from->Execute({"GET", key}).str});
  } else if (type.str == "hash") {
    const Reply all = from->Execute({"HGETALL", key});
    std::vector<std::string> hset = {"HSET", key};
    for (const Reply& e : all.elements) hset.push_back(e.str);
    to->Execute(hset);
  } else {
    return;
  }
  if (pttl.integer > 0) to->Execute({"PEXPIRE", key, absl::StrCat(pttl.integer)});
  from->Execute({"DEL", key});
}

void FakeCluster::FinishMigration(int slot) {
  auto m = migrating_.find(slot);
  if (m == migrating_.end()) return;
  owner_[slot] = m->second.to;
  migrating_.erase(m);
}

void FakeCluster::Failover(const std::string& address, const std::string& new_address) {
  auto it = nodes_.find(address);
  if (it == nodes_.end()) return;
  std::unique_ptr<FakeRedis> server = std::move(it->second);
  nodes_.erase(it);
  // A promoted replica has the data set but has run no script.
  server->Execute({"SCRIPT", "FLUSH"});
  nodes_[new_address] = std::move(server);
  for (std::string& owner : owner_) {
    if (owner == address) owner = new_address;
  }
  for (FakeClusterConnection* c : connections_) {
    if (c->address_ == address) c->inner_.Partition();
  }
}

bool FakeCluster::HasKey(const std::string& address, const std::string& key) {
  FakeRedis* server = node(address);
  return server != nullptr && server->Execute({"EXISTS", key}).integer == 1;
}

Reply FakeCluster::SlotsReply() const {
  Reply out = Reply::Array({});
  int start = 0;
  for (int s = 1; s <= kClusterSlots; ++s) {
    if (s < kClusterSlots && owner_[s] == owner_[start]) continue;
    const std::string& a = owner_[start];
    if (!a.empty()) {
      out.elements.push_back(Reply::Array(
          {Reply::Integer(start), Reply::Integer(s - 1),
           Reply::Array({Reply::String(a.substr(0, a.rfind(':'))), Reply::Integer(PortOf(a)),
                         Reply::String(absl::StrCat("id-", a))})}));
    }
    start = s;
  }
  return out;
}

std::optional<Reply> FakeCluster::Intercept(const std::string& address, bool asking,
                                            const std::vector<std::string>& argv) {
  if (absl::EqualsIgnoreCase(argv[0], "CLUSTER") && argv.size() >= 2 &&
      absl::EqualsIgnoreCase(argv[1], "SLOTS")) {
    return SlotsReply();
  }
  if (absl::EqualsIgnoreCase(argv[0], "ASKING")) return Reply::Status("OK");
  if (down_) return Reply::Error("CLUSTERDOWN The cluster is down");
  const std::vector<std::string> keys = RoutingKeys(argv);
  if (keys.empty()) return std::nullopt;
  const int slot = KeySlot(keys[0]);
  for (const std::string& k : keys) {
    if (KeySlot(k) != slot) {
      return Reply::Error("CROSSSLOT Keys in request don't hash to the same slot");
    }
  }
  int present = 0;
  for (const std::string& k : keys) present += HasKey(address, k) ? 1 : 0;
  const bool all = present == static_cast<int>(keys.size());
  auto m = migrating_.find(slot);
  if (owner_[slot] == address) {
    if (m == migrating_.end() || all) return std::nullopt;
    if (present == 0) return Reply::Error(absl::StrCat("ASK ", slot, " ", m->second.to));
    return Reply::Error("TRYAGAIN Multiple keys request during rehashing of slot");
  }
  if (m != migrating_.end() && m->second.to == address && asking) {
    if (keys.size() == 1 || all) return std::nullopt;
    return Reply::Error("TRYAGAIN Multiple keys request during rehashing of slot");
  }
  return Reply::Error(absl::StrCat("MOVED ", slot, " ", owner_[slot]));
}

FakeClusterConnection::FakeClusterConnection(FakeCluster* cluster, std::string address,
                                             FakeRedis* server)
    : cluster_(cluster), address_(std::move(address)), inner_(cluster->loop_, server) {}

FakeClusterConnection::~FakeClusterConnection() {
  if (cluster_ != nullptr) {
    auto& c = cluster_->connections_;
    c.erase(std::remove(c.begin(), c.end(), this), c.end());
  }
}

absl::Status FakeClusterConnection::Send(std::vector<std::string> argv,
                                         absl::Duration timeout, ReplyCallback callback) {
  if (argv.empty() || cluster_ == nullptr) return inner_.Send(std::move(argv), timeout,
                                                              std::move(callback));
  cluster_->received_[address_].push_back(argv);
  const bool asking = asking_;
  asking_ = absl::EqualsIgnoreCase(argv[0], "ASKING");
  std::optional<Reply> answer = cluster_->Intercept(address_, asking, argv);
  if (answer.has_value()) {
    // Not applied; the answer comes back after the round trip, in order.
    inner_.FailNextWithReply(1, *std::move(answer));
  }
  return inner_.Send(std::move(argv), timeout, std::move(callback));
}

absl::Status FakeClusterConnection::SendScript(
    absl::string_view body, absl::Span<const absl::string_view> evalsha_argv,
    absl::Duration timeout, ReplyCallback callback) {
  if (evalsha_argv.empty() || cluster_ == nullptr) {
    return inner_.SendScript(body, evalsha_argv, timeout, std::move(callback));
  }
  std::vector<std::string> argv;
  argv.reserve(evalsha_argv.size());
  for (absl::string_view a : evalsha_argv) argv.emplace_back(a);
  cluster_->received_[address_].push_back(argv);
  const bool asking = asking_;
  asking_ = false;
  std::optional<Reply> answer = cluster_->Intercept(address_, asking, argv);
  if (answer.has_value()) {
    // Not applied (nor its load); the answer comes back after the round
    // trip, in order.
    inner_.FailNextWithReply(1, *std::move(answer));
  }
  return inner_.SendScript(body, evalsha_argv, timeout, std::move(callback));
}

absl::StatusOr<std::unique_ptr<Subscription>> FakeClusterConnection::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  return inner_.Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
}

absl::Status FakeClusterConnection::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  return inner_.Connect(std::move(callback));
}

void FakeClusterConnection::Close() { inner_.Close(); }

}  // namespace dlock
