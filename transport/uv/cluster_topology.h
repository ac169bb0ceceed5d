// This header defines `ClusterTopology`, the slot map of a ClusterTransport
// (cluster_transport.h) and its refresh policy: `CLUSTER SLOTS` is asked of
// the known masters, then every other node held, then the seeds, in turn,
// until one answers with slots; at most one refresh is in flight; and,
// when `refresh_interval` is positive, one starts every interval. A
// successful load connects to every master it names.
//
// Not thread-safe: call only on the loop's thread. The loop, the options
// and the node pool must outlive it.
#ifndef DLOCK_TRANSPORT_UV_CLUSTER_TOPOLOGY_H_
#define DLOCK_TRANSPORT_UV_CLUSTER_TOPOLOGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/uv/cluster_nodes.h"
#include "dlock/transport/uv/cluster_options.h"
#include "dlock/transport/uv/cluster_slot_map.h"

namespace dlock {

class ClusterTopology {
 public:
  // `on_loaded` runs after every successful load; `on_unavailable` when a
  // refresh fails while no map was ever loaded, with kUnavailable.
  ClusterTopology(EventLoop* loop, const ClusterTransportOptions& options,
                  ClusterNodes* nodes, absl::AnyInvocable<void()> on_loaded,
                  absl::AnyInvocable<void(absl::Status)> on_unavailable);
  ClusterTopology(const ClusterTopology&) = delete;
  ClusterTopology& operator=(const ClusterTopology&) = delete;
  ~ClusterTopology() { Stop(); }

  // Starts a refresh unless one is in flight or the topology is stopped.
  void Refresh();
  // Starts the periodic refreshes (none when refresh_interval <= 0).
  void StartPeriodicRefresh();
  // No refresh starts or completes after this.
  void Stop();

  const ClusterSlotMap& map() const { return map_; }
  ClusterSlotMap& map() { return map_; }
  bool loaded() const { return loaded_; }
  uint64_t loads() const { return loads_; }
  // The nodes to ask for the map, in the order asked.
  std::vector<std::string> Candidates() const;
  // Why the last refresh or node connection failed (OK after a load).
  const absl::Status& last_error() const { return last_error_; }
  void NoteError(absl::Status why) { last_error_ = std::move(why); }

 private:
  void AskForSlots(size_t candidate);
  void OnSlots(size_t candidate, absl::StatusOr<Reply> reply);
  void Failed();

  EventLoop* const loop_;
  const ClusterTransportOptions& options_;
  ClusterNodes* const nodes_;
  absl::AnyInvocable<void()> on_loaded_;
  absl::AnyInvocable<void(absl::Status)> on_unavailable_;
  ClusterSlotMap map_;
  bool stopped_ = false;
  bool loaded_ = false;
  bool refreshing_ = false;
  absl::Status last_error_;
  std::vector<std::string> candidates_;  // of the refresh in flight
  uint64_t loads_ = 0;
  TimerId refresh_timer_ = 0;
  // Expires when the topology is destroyed; callbacks check it.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CLUSTER_TOPOLOGY_H_
