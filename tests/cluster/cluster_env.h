// This header defines `ClusterEnv`: the behaviour suites' LockTestEnv
// (lock/lock_behavior_suite.h) over a real 3 + 3 Redis Cluster
// (//testing:redis_cluster) through ClusterTransport. One cluster per test
// process (SharedCluster(), started by the first env and never stopped: its
// nodes die with the process); each env starts from a cluster holding only
// the trusted per-slot data-set markers. Not thread-safe: one test at a
// time, on the thread running its loop.
#ifndef DLOCK_TESTS_CLUSTER_CLUSTER_ENV_H_
#define DLOCK_TESTS_CLUSTER_CLUSTER_ENV_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_uv.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace cluster_test {

inline constexpr char kMarkerPrefix[] = "dlock:data-set-began:";

inline testing::RedisCluster* SharedCluster() {
  static testing::RedisCluster* cluster = [] {
    auto c = testing::RedisCluster::Start({});
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return static_cast<testing::RedisCluster*>(nullptr);
    }
    return c->release();  // lives for the process; its nodes die with it
  }();
  return cluster;
}

class ClusterEnv : public testing::LockTestEnv {
 public:
  ClusterEnv() : cluster_(SharedCluster()), loop_(std::make_unique<UvEventLoop>(uv_.get())) {
    if (cluster_ == nullptr) return;
    // Only the markers stay from earlier tests.
    auto masters = cluster_->Masters();
    EXPECT_TRUE(masters.ok()) << masters.status();
    if (masters.ok()) masters_ = *masters;
    for (int m : masters_) {
      auto keys = cluster_->Command(m, {"KEYS", "*"});
      if (!keys.ok()) continue;
      for (const Reply& k : keys->elements) {
        if (!absl::StartsWith(k.str, kMarkerPrefix)) {
          EXPECT_TRUE(cluster_->Command(m, {"DEL", k.str}).ok());
        }
      }
    }
  }

  ~ClusterEnv() override {
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);
  }

  EventLoop* loop() override { return loop_.get(); }

  Transport* NewClient() override {
    ClusterUvOptions o;
    if (cluster_ != nullptr) o.cluster.seeds.push_back({"127.0.0.1", cluster_->node(0).port()});
    auto t = CreateUvClusterTransport(uv_.get(), std::move(o));
    EXPECT_TRUE(t.ok()) << t.status();
    clients_.push_back(*std::move(t));
    absl::Status up = uv_.ConnectAndWait(*clients_.back());
    EXPECT_TRUE(up.ok()) << up;
    return clients_.back().get();
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return uv_.RunUntil(done, limit);
  }
  void RunFor(absl::Duration d) override { uv_.RunFor(d); }

  // A keyed command goes to its slot's master, a keyless one (TIME: the
  // nodes share this machine's clock) to a master. DBSIZE counts the keys of
  // every master, with the 16384 per-slot markers counted as the one marker
  // a standalone server holds.
  Reply Server(std::vector<std::string> argv) override {
    if (cluster_ == nullptr) return Reply::Error("no cluster");
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
      auto owner = cluster_->OwnerOf(*slot);
      if (!owner.ok()) return Reply::Error(owner.status().ToString());
      node = *owner;
    }
    absl::StatusOr<Reply> r = cluster_->Command(node, std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  // Classic subscriptions live on one node each: the sum over all nodes.
  int64_t Subscribers(const std::string& channel) override {
    int64_t total = 0;
    for (int i = 0; cluster_ != nullptr && i < cluster_->size(); ++i) {
      auto r = cluster_->Command(i, {"PUBSUB", "NUMSUB", channel});
      if (r.ok() && r->is_array() && r->elements.size() == 2) total += r->elements[1].integer;
    }
    return total;
  }

  absl::Duration round_trip() const override { return absl::Milliseconds(250); }

  // The cluster and its masters' node indexes, for per-node inspection.
  testing::RedisCluster* cluster() const { return cluster_; }
  const std::vector<int>& masters() const { return masters_; }

 private:
  testing::RedisCluster* const cluster_;
  testing::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<int> masters_;
  std::vector<std::unique_ptr<ClusterTransport>> clients_;
};

}  // namespace cluster_test
}  // namespace dlock

#endif  // DLOCK_TESTS_CLUSTER_CLUSTER_ENV_H_
