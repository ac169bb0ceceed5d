#include "dlock/transport/uv/cluster_topology.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace dlock {

ClusterTopology::ClusterTopology(EventLoop* loop, const ClusterTransportOptions& options,
                                 ClusterNodes* nodes, absl::AnyInvocable<void()> on_loaded,
                                 absl::AnyInvocable<void(absl::Status)> on_unavailable)
    : loop_(loop),
      options_(options),
      nodes_(nodes),
      on_loaded_(std::move(on_loaded)),
      on_unavailable_(std::move(on_unavailable)) {}

std::vector<std::string> ClusterTopology::Candidates() const {
  std::vector<std::string> out = map_.Masters();
  absl::flat_hash_set<std::string> seen(out.begin(), out.end());
  for (std::string& address : nodes_->Addresses()) {
    if (seen.insert(address).second) out.push_back(std::move(address));
  }
  for (const ClusterEndpoint& s : options_.seeds) {
    std::string a = ClusterAddress(s.host, s.port);
    if (seen.insert(a).second) out.push_back(a);
  }
  return out;
}

void ClusterTopology::Refresh() {
  if (refreshing_ || stopped_) return;
  refreshing_ = true;
  candidates_ = Candidates();
  AskForSlots(0);
}

void ClusterTopology::AskForSlots(size_t candidate) {
  for (; candidate < candidates_.size(); ++candidate) {
    absl::StatusOr<Transport*> node = nodes_->Get(candidates_[candidate]);
    if (!node.ok()) {
      last_error_ = node.status();
      continue;
    }
    absl::Status s = (*node)->Send(
        {"CLUSTER", "SLOTS"}, options_.topology_timeout,
        [this, life = std::weak_ptr<int>(life_), candidate](absl::StatusOr<Reply> reply) {
          if (life.expired() || stopped_) return;
          OnSlots(candidate, std::move(reply));
        });
    if (s.ok()) return;
    last_error_ = s;
  }
  Failed();
}

void ClusterTopology::OnSlots(size_t candidate, absl::StatusOr<Reply> reply) {
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
    map_.Load(*reply, e.ok() ? e->host : "");
    // Connect to every master now, not on its first command.
    for (const std::string& m : map_.Masters()) {
      absl::StatusOr<Transport*> node = nodes_->Get(m);
      if (!node.ok()) last_error_ = node.status();
    }
    refreshing_ = false;
    loaded_ = true;
    ++loads_;
    last_error_ = absl::OkStatus();
    on_loaded_();
    return;
  }
  AskForSlots(candidate + 1);
}

void ClusterTopology::Failed() {
  refreshing_ = false;
  if (loaded_) return;  // keep routing by the old map
  const absl::Status why = last_error_.ok()
                               ? absl::UnavailableError("no cluster node to ask")
                               : last_error_;
  on_unavailable_(absl::UnavailableError(
      absl::StrCat("cluster slot map unavailable: ", why.message())));
}

void ClusterTopology::StartPeriodicRefresh() {
  if (options_.refresh_interval <= absl::ZeroDuration() || stopped_) return;
  refresh_timer_ = loop_->RunAfter(options_.refresh_interval,
                                   [this, life = std::weak_ptr<int>(life_)] {
                                     if (life.expired() || stopped_) return;
                                     refresh_timer_ = 0;
                                     Refresh();
                                     StartPeriodicRefresh();
                                   });
}

void ClusterTopology::Stop() {
  stopped_ = true;
  if (refresh_timer_ != 0) loop_->Cancel(refresh_timer_);
  refresh_timer_ = 0;
}

}  // namespace dlock
