#include "dlock/transport/uv/cluster_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {

absl::StatusOr<std::unique_ptr<ClusterTransport>> ClusterTransport::Create(
    EventLoop* loop, ClusterTransportOptions options, ClusterNodeFactory factory,
    std::unique_ptr<EventLoop> owned_loop) {
  if (loop == nullptr) return absl::InvalidArgumentError("cluster: null event loop");
  if (!factory) return absl::InvalidArgumentError("cluster: null node factory");
  if (absl::Status s = ValidateClusterOptions(options); !s.ok()) return s;
  std::unique_ptr<ClusterTransport> t(new ClusterTransport(
      loop, std::move(options), std::move(factory), std::move(owned_loop)));
  t->topology_.Refresh();
  t->topology_.StartPeriodicRefresh();
  return t;
}

ClusterTransport::ClusterTransport(EventLoop* loop, ClusterTransportOptions options,
                                   ClusterNodeFactory factory,
                                   std::unique_ptr<EventLoop> owned_loop)
    : loop_(loop),
      owned_loop_(std::move(owned_loop)),
      options_(std::move(options)),
      nodes_(std::move(factory)),
      topology_(loop, options_, &nodes_, [this] { OnMapLoaded(); },
                [this](absl::Status status) { OnMapUnavailable(std::move(status)); }),
      router_(loop, options_, &topology_, &nodes_) {}

ClusterTransport::~ClusterTransport() { Close(); }

Transport* ClusterTransport::Node(const std::string& address) {
  if (closed_) return nullptr;
  absl::StatusOr<Transport*> node = nodes_.Get(address);
  if (node.ok()) return *node;
  topology_.NoteError(node.status());
  return nullptr;
}

absl::Status ClusterTransport::SendScript(absl::string_view body,
                                          absl::Span<const absl::string_view> evalsha_argv,
                                          absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (evalsha_argv.size() < 3) {
    return absl::InvalidArgumentError("a script command needs EVALSHA, sha1 and numkeys");
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (body.empty()) return absl::InvalidArgumentError("empty script body");
  std::vector<std::string> argv;
  argv.reserve(evalsha_argv.size());
  for (absl::string_view a : evalsha_argv) argv.emplace_back(a);
  absl::StatusOr<int> slot = CommandSlot(argv);
  if (!slot.ok()) return slot.status();
  router_.Route(std::move(argv), *slot, timeout, std::move(callback), body);
  return absl::OkStatus();
}

absl::Status ClusterTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                                    ReplyCallback callback) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (absl::Status s = ValidateClusterSend(argv, timeout, callback != nullptr); !s.ok()) return s;
  absl::StatusOr<int> slot = CommandSlot(argv);
  if (!slot.ok()) return slot.status();
  router_.Route(std::move(argv), *slot, timeout, std::move(callback));
  return absl::OkStatus();
}

absl::Status ClusterTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  if (topology_.loaded()) {
    Defer(std::move(callback), absl::OkStatus());
    return absl::OkStatus();
  }
  connect_waiters_.push_back(std::move(callback));
  topology_.Refresh();
  return absl::OkStatus();
}

void ClusterTransport::Defer(absl::AnyInvocable<void(absl::Status) &&> callback,
                             absl::Status status) {
  deferred_.Push(DeferredStatus{std::move(callback), std::move(status)});
}

void ClusterTransport::OnMapLoaded() {
  router_.MapLoaded();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  for (auto& w : waiters) Defer(std::move(w), absl::OkStatus());
  PlaceSubscriptions();
  // Connections to nodes that are no longer masters (seeds and replicas
  // asked for the map, failed-over masters) go once idle, unless a
  // subscription lives there.
  const std::vector<std::string> masters = topology_.map().Masters();
  nodes_.Prune([&](const std::string& address) {
    return std::find(masters.begin(), masters.end(), address) != masters.end() ||
           subs_.Hosts(address);
  });
}

void ClusterTransport::OnMapUnavailable(absl::Status status) {
  // No map at all: the commands waiting for one fail now.
  router_.MapUnavailable(status);
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  for (auto& w : waiters) Defer(std::move(w), status);
}

// ---- Pub/sub ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Subscription>> ClusterTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("cluster transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      subs_.Add(std::move(channel), std::move(on_message), std::move(on_ready), &id);
  PlaceSubscription(id);
  return handle;
}

void ClusterTransport::PlaceSubscriptions() {
  const std::vector<std::string> masters = topology_.map().Masters();
  for (uint64_t id : subs_.Ids()) {
    const SubscriptionRelay::Record* sub = subs_.Find(id);
    if (sub == nullptr) continue;
    if (sub->inner == nullptr ||
        std::find(masters.begin(), masters.end(), sub->node) == masters.end()) {
      PlaceSubscription(id);
    }
  }
}

void ClusterTransport::PlaceSubscription(uint64_t id) {
  std::string address = topology_.map().OwnerOf(KeySlot(subs_.Find(id)->channel));
  if (address.empty()) {
    const std::vector<std::string> c = topology_.Candidates();
    if (!c.empty()) address = c.front();
  }
  Transport* node = Node(address);
  absl::Status placed = subs_.Place(id, node, address);
  if (placed.ok()) return;
  if (node == nullptr) {
    placed = absl::UnavailableError(absl::StrCat("cluster: cannot reach ", address, ": ",
                                                 topology_.last_error().message()));
  }
  auto on_ready = subs_.TakeReady(id);
  if (on_ready) Defer(std::move(on_ready), std::move(placed));
}

// ---- Close -----------------------------------------------------------------

void ClusterTransport::Close() {
  if (closed_) return;
  closed_ = true;
  topology_.Stop();
  std::vector<ReplyCallback> requests = router_.Close();
  // Node transports fail their own pending callbacks; ours ignore them
  // (the router is closed).
  subs_.DetachAll();
  nodes_.CloseAll();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> ready = subs_.DetachAllAndTakeReady();
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
  waiters.swap(connect_waiters_);
  const absl::Status cancelled = absl::CancelledError("cluster transport closed");
  for (auto& r : requests) std::move(r)(cancelled);
  for (auto& w : waiters) std::move(w)(cancelled);
  for (auto& w : ready) std::move(w)(cancelled);
  deferred_.Stop();
  for (DeferredStatus& d : deferred_.TakeAll()) std::move(d.callback)(cancelled);
}

}  // namespace dlock
