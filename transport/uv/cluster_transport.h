// This header defines `ClusterTransport`, a `Transport` over a Redis
// Cluster: it keeps the cluster's slot map and sends every command to the
// master owning the slot of the command's first key, over one node
// transport per master (a `HiredisTransport` each, see cluster_uv.h; a
// `FakeTransport` each in the routing tests).
//
// Routing:
//   - The slot of a command is KeySlot() of its first key: argv[1] for an
//     ordinary command, the first KEYS entry for EVAL/EVALSHA. An
//     EVAL/EVALSHA whose KEYS are in different slots is refused by Send with
//     kInvalidArgument, before anything is sent (Redis would answer
//     CROSSSLOT). A command without keys (PING, INFO, TIME, CLUSTER, ROLE,
//     SCRIPT, PUBLISH, ... and EVAL with 0 keys) goes to a master whose
//     connection is up (any master when none is).
//   - The slot map comes from `CLUSTER SLOTS`, asked of the seeds (then of
//     every known node) in turn (then a connection to every master it names
//     is started): at Create, on every MOVED and on every lost
//     connection or CLUSTERDOWN (at most one refresh in flight), and every
//     `refresh_interval`. Commands sent before the first map wait for it, up
//     to their own deadline.
//   - `MOVED <slot> <host:port>`: the slot's owner is updated at once, a
//     refresh is started, and the command is sent again to the new owner.
//   - `ASK <slot> <host:port>` (a slot being migrated whose key has
//     already moved): `ASKING` then the command, on the target node, once;
//     the map is not changed.
//   - `TRYAGAIN` (a multi-key command -- every lock script -- on a slot
//     being migrated while only some of its keys have moved, or a new
//     resource's keys on the importing node: such an acquire waits for the
//     migration to end) and `CLUSTERDOWN` (a failover in progress): sent
//     again every `retry_delay` until the command's deadline; then
//     kDeadlineExceeded naming the last reply.
//   - At most `max_redirects` MOVED per command (a map that keeps changing);
//     then the MOVED error reply is the result.
//   - Scripts (SendScript) go to the node with the node's own SendScript:
//     each node connection loads a script before its first EVALSHA on that
//     connection (transport.h), so the first script on a node -- a new
//     master after a failover, the target of a MOVED -- is loaded right
//     before it runs, in order with what follows it on that node. After
//     ASK the script goes as `ASKING` + `EVAL body ...`.
//   A resend happens only on an error reply, which means the command did not
//   run; a timeout or a lost connection is reported (kDeadlineExceeded,
//   kUnavailable: the command may have run) and never resent.
//
// Release notifications: Subscribe uses classic SUBSCRIBE on one node (the
// master of the channel's slot when known). A Redis Cluster forwards every
// PUBLISH -- including the release scripts' -- to every node over the
// cluster bus, so one subscription anywhere sees every release. Sharded
// pub/sub (SSUBSCRIBE/SPUBLISH, 7.0) would avoid the broadcast, but hiredis
// 0.14's async client does not know the `smessage`/`ssubscribe` push
// replies (it would match them to commands), and the release script would
// differ between standalone and cluster; the broadcast costs one bus
// message per node per release. When a topology refresh no longer lists
// the node a subscription lives on, the subscription moves to a listed node.
// Connections to nodes a refresh no longer names as masters are closed once
// idle, so a long-lived client does not keep reconnecting to dead nodes.
// Messages published while a subscription moves or reconnects are lost,
// as with any Transport (RetryLock then falls back to its backoff).
//
// Contract: that of Transport (transport.h). Every accepted command calls
// back exactly once, on the loop, never inside Send; Close() fails all
// pending commands with kCancelled synchronously, closes every node
// transport, and no callback runs after it returns. The transport may be
// destroyed inside its own callbacks.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/cluster_nodes.h"
#include "dlock/transport/uv/cluster_options.h"  // options, ParseClusterEndpoint
#include "dlock/transport/uv/cluster_router.h"
#include "dlock/transport/uv/cluster_topology.h"
#include "dlock/transport/uv/deferred_queue.h"
#include "dlock/transport/uv/subscription_relay.h"

namespace dlock {

// The parts (each its own header): ClusterTopology (the slot map and its
// refresh), ClusterRouter (commands, redirects), ClusterNodes (the node
// connections), SubscriptionRelay (subscriptions that move between nodes).
class ClusterTransport : public Transport {
 public:
  // Validates `options` (kInvalidArgument: no seed, a seed without host or
  // with a port outside 1..65535, non-positive topology_timeout or
  // retry_delay, max_redirects < 1) and starts loading the slot map.
  // `loop` (the timers) must outlive the transport; `owned_loop`, when set,
  // is `loop` and is destroyed with the transport.
  static absl::StatusOr<std::unique_ptr<ClusterTransport>> Create(
      EventLoop* loop, ClusterTransportOptions options, ClusterNodeFactory factory,
      std::unique_ptr<EventLoop> owned_loop = nullptr);

  ClusterTransport(const ClusterTransport&) = delete;
  ClusterTransport& operator=(const ClusterTransport&) = delete;
  ~ClusterTransport() override;

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // Routed like the EVALSHA (first KEYS entry), and sent again on MOVED,
  // TRYAGAIN and CLUSTERDOWN with the node's SendScript (see above).
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  bool cluster() const override { return true; }

  // OK once a slot map is loaded (at once, on a later turn, when it is), or
  // the failure of the current load (kUnavailable), or kCancelled by Close.
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  void Close() override;
  // True while a slot map is loaded.
  bool connected() const override { return topology_.loaded() && !closed_; }
  size_t pending_commands() const override { return router_.pending(); }

  // ---- Introspection (tests, `dlock check`) ------------------------------
  // "host:port" of the master the map names for `slot`, or "" if none.
  std::string OwnerOf(int slot) const { return topology_.map().OwnerOf(slot); }
  // Every master in the current map, "host:port".
  std::vector<std::string> Masters() const { return topology_.map().Masters(); }
  // The transport of node "host:port" (made on first use), or null after
  // Close or when the factory fails.
  Transport* Node(const std::string& address);
  // How many slot-map loads succeeded, and redirects followed (tests).
  uint64_t topology_loads() const { return topology_.loads(); }
  // Node connections currently held.
  size_t node_connections() const { return nodes_.size(); }
  uint64_t moved_count() const { return router_.moved(); }
  uint64_t ask_count() const { return router_.asked(); }

  // The keys of `argv` whose slot routes it (see above): empty when it has
  // none; kInvalidArgument when EVAL/EVALSHA keys span slots or numkeys is
  // malformed. Public for tests.
  static absl::StatusOr<int> SlotOfCommand(const std::vector<std::string>& argv) {
    return CommandSlot(argv);
  }

 private:
  ClusterTransport(EventLoop* loop, ClusterTransportOptions options,
                   ClusterNodeFactory factory, std::unique_ptr<EventLoop> owned_loop);

  void OnMapLoaded();
  void OnMapUnavailable(absl::Status status);
  // Runs `callback` with `status` on a later turn; Close() first: with
  // kCancelled, inside Close.
  void Defer(absl::AnyInvocable<void(absl::Status) &&> callback, absl::Status status);
  // Places each subscription that has no node or whose node is no master.
  void PlaceSubscriptions();
  void PlaceSubscription(uint64_t id);

  EventLoop* const loop_;
  std::unique_ptr<EventLoop> owned_loop_;
  const ClusterTransportOptions options_;
  bool closed_ = false;
  // Declared in dependency order: destroyed subscriptions first, node
  // connections last (but before the loop they use).
  ClusterNodes nodes_;
  ClusterTopology topology_;
  ClusterRouter router_;
  SubscriptionRelay subs_;
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> connect_waiters_;
  // Connect confirmations and subscription readiness waiting for a later
  // turn (Defer). Close() takes them and fails them with kCancelled, so none
  // runs after it; destroying the queue cancels its timer.
  struct DeferredStatus {
    absl::AnyInvocable<void(absl::Status) &&> callback;
    absl::Status status;
  };
  DeferredQueue<DeferredStatus> deferred_{loop_, [](DeferredStatus&& d) {
                                            std::move(d.callback)(std::move(d.status));
                                          }};
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_TRANSPORT_H_
