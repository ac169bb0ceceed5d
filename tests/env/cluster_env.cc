#include "dlock/tests/env/cluster_env.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_uv.h"

namespace dlock {
namespace test_support {

RedisCluster* SharedRedisCluster() {
  static RedisCluster* cluster = [] {
    auto c = RedisCluster::Start({});
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return static_cast<RedisCluster*>(nullptr);
    }
    return c->release();  // lives for the process; its nodes die with it
  }();
  return cluster;
}

ClusterRedis::ClusterRedis() : cluster_(SharedRedisCluster()) {
  if (cluster_ == nullptr) return;
  // Only the markers stay from earlier tests.
  auto masters = cluster_->Masters();
  EXPECT_TRUE(masters.ok()) << masters.status();
  if (masters.ok()) masters_ = *masters;
  for (int m : masters_) {
    auto keys = cluster_->Command(m, {"KEYS", "*"});
    if (!keys.ok()) continue;
    for (const Reply& k : keys->elements) {
      if (!absl::StartsWith(k.str, kClusterMarkerPrefix)) {
        EXPECT_TRUE(cluster_->Command(m, {"DEL", k.str}).ok());
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<Transport>> ClusterRedis::NewTransport(uv_loop_t* loop) {
  ClusterUvOptions o;
  if (cluster_ != nullptr) o.cluster.seeds.push_back({"127.0.0.1", cluster_->node(0).port()});
  return CreateUvClusterTransport(loop, std::move(o));
}

absl::StatusOr<Reply> ClusterRedis::Command(std::vector<std::string> argv) {
  if (cluster_ == nullptr) return absl::FailedPreconditionError("no cluster");
  if (absl::EqualsIgnoreCase(argv[0], "DBSIZE")) {
    int64_t total = 0;
    for (int m : masters_) {
      auto n = cluster_->Command(m, {"DBSIZE"});
      if (n.ok()) total += n->integer;
    }
    return Reply::Integer(total - kClusterSlots + 1);
  }
  absl::StatusOr<int> slot = ClusterTransport::SlotOfCommand(argv);
  EXPECT_TRUE(slot.ok()) << argv[0];
  int node = masters_.empty() ? 0 : masters_[0];  // keyless (TIME): any master
  if (slot.ok() && *slot >= 0) {
    absl::StatusOr<int> owner = cluster_->OwnerOf(*slot);
    if (!owner.ok()) return owner.status();
    node = *owner;
  }
  return cluster_->Command(node, std::move(argv));
}

int64_t ClusterRedis::Subscribers(const std::string& channel) {
  int64_t total = 0;
  for (int i = 0; cluster_ != nullptr && i < cluster_->size(); ++i) {
    auto r = cluster_->Command(i, {"PUBSUB", "NUMSUB", channel});
    if (r.ok() && r->is_array() && r->elements.size() == 2) total += r->elements[1].integer;
  }
  return total;
}

}  // namespace test_support
}  // namespace dlock
