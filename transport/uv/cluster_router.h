// This header defines `ClusterRouter`, the command path of a
// ClusterTransport (cluster_transport.h): it holds each accepted command
// until the first slot map is loaded, sends it to its slot's master (any
// master, a connected one first, for a command without keys), follows
// MOVED / ASK / TRYAGAIN / CLUSTERDOWN (cluster_redirect.h says which reply
// is which, and that only an error reply is ever resent) until the
// command's deadline, and calls back exactly once, never inside Route.
//
// Not thread-safe: call only on the loop's thread. The loop, the options,
// the topology and the node pool must outlive it.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_ROUTER_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_ROUTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/cluster_nodes.h"
#include "dlock/transport/uv/cluster_options.h"
#include "dlock/transport/uv/cluster_topology.h"
#include "dlock/transport/uv/held_commands.h"

namespace dlock {

class ClusterRouter {
 public:
  ClusterRouter(EventLoop* loop, const ClusterTransportOptions& options,
                ClusterTopology* topology, ClusterNodes* nodes);
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;
  ~ClusterRouter();

  // Takes a validated command routed by `slot` (-1: any master): sent now
  // when a map is loaded, else held until one is (then kDeadlineExceeded
  // when `timeout` passes first). Starts a refresh when there is no map.
  // `script_body`, when not empty, makes it a script command: `argv` is its
  // EVALSHA argv and it goes to the node with Transport::SendScript (the
  // node's connection loads the script first if it has not: the first
  // script on a node new to it, after MOVED, is loaded before it runs),
  // except after ASK: `ASKING` then `EVAL body ...`, so that nothing comes
  // between ASKING and the script. The body must outlive the command.
  void Route(std::vector<std::string> argv, int slot, absl::Duration timeout,
             ReplyCallback callback, absl::string_view script_body = {});
  // A map was loaded: the held commands go out, in the order routed.
  void MapLoaded();
  // No map could be loaded: the held commands fail with `status` on a
  // later turn.
  void MapUnavailable(const absl::Status& status);
  // Stops every timer and takes every pending command's callback, for the
  // owner to run (with kCancelled) once its node connections are closed.
  // Node replies arriving after it are ignored.
  std::vector<ReplyCallback> Close();

  size_t pending() const { return requests_.size(); }
  uint64_t moved() const { return moved_; }
  uint64_t asked() const { return asked_; }

 private:
  struct Request;

  void Dispatch(uint64_t id);
  void OnReply(uint64_t id, absl::StatusOr<Reply> reply);
  void Finish(uint64_t id, absl::StatusOr<Reply> result);
  // Runs `fn` after `delay` unless the router is closed or destroyed first.
  void Later(absl::Duration delay, absl::AnyInvocable<void()> fn);
  void FinishLater(uint64_t id, absl::Status status);

  EventLoop* const loop_;
  const ClusterTransportOptions& options_;
  ClusterTopology* const topology_;
  ClusterNodes* const nodes_;
  bool closed_ = false;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Request>> requests_;
  HeldCommands<uint64_t> held_;  // ids waiting for the first map
  uint64_t next_id_ = 1;
  std::vector<TimerId> timers_;  // pending zero-delay deliveries and retries
  uint64_t moved_ = 0;
  uint64_t asked_ = 0;
  // Expires when the router is destroyed; callbacks check it.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_ROUTER_H_
