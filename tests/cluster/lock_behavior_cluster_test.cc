// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real 3 + 3 Redis Cluster through ClusterTransport, unchanged. One cluster
// per test process; each test starts from a cluster holding only the
// trusted per-slot data-set markers. Also: the watchdog renewing leases on
// many slots.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_uv.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace {

constexpr char kMarkerPrefix[] = "dlock:data-set-began:";

testing::RedisCluster* SharedCluster() {
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
    bool up = false;
    EXPECT_TRUE(clients_.back()->Connect([&up](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      up = true;
    }).ok());
    EXPECT_TRUE(uv_.RunUntil([&] { return up; }, absl::Seconds(10)));
    return clients_.back().get();
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return uv_.RunUntil(done, limit);
  }
  void RunFor(absl::Duration d) override { uv_.RunFor(d); }

  // A keyed command goes to its slot's master. DBSIZE counts the keys of
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
    EXPECT_TRUE(slot.ok() && *slot >= 0) << argv[0];
    auto owner = cluster_->OwnerOf(slot.ok() && *slot >= 0 ? *slot : 0);
    if (!owner.ok()) return Reply::Error(owner.status().ToString());
    absl::StatusOr<Reply> r = cluster_->Command(*owner, std::move(argv));
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

 private:
  testing::RedisCluster* const cluster_;
  testing::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<int> masters_;
  std::vector<std::unique_ptr<ClusterTransport>> clients_;
};

// The watchdog keeps leases on many slots alive past their ttl, over the
// cluster, and stops at release.
TEST(ClusterWatchdogTest, RenewsLeasesOnEverySlot) {
  ClusterEnv env;
  Transport* t = env.NewClient();
  SimpleLock lock(env.loop(), t);
  Watchdog dog(env.loop(), &lock);
  std::vector<WatchHandle> watches;
  std::vector<Lease> leases;
  int lost = 0;
  for (int i = 0; i < 30; ++i) {
    bool done = false;
    AcquireOptions o;
    o.ttl = absl::Milliseconds(300);
    auto h = lock.Acquire(absl::StrCat("watched/", i), o, [&](absl::StatusOr<Lease> l) {
      ASSERT_TRUE(l.ok()) << l.status();
      leases.push_back(*l);
      done = true;
    });
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(env.RunUntil([&] { return done; }, absl::Seconds(5)));
    WatchOptions w;
    w.on_lost = [&lost](absl::Status) { ++lost; };
    auto watch = dog.Watch(leases.back(), std::move(w));
    ASSERT_TRUE(watch.ok()) << watch.status();
    watches.push_back(*std::move(watch));
  }
  env.RunFor(absl::Milliseconds(1200));  // four ttls
  EXPECT_EQ(lost, 0);
  KeyScheme keys;
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"GET", keys.LockKey(l.resource)}), Reply::String(l.token));
  }
  int released = 0;
  for (WatchHandle& w : watches) {
    ASSERT_TRUE(w.Release([&](absl::Status s) {
                   EXPECT_TRUE(s.ok()) << s;
                   ++released;
                 }).ok());
  }
  ASSERT_TRUE(env.RunUntil([&] { return released == 30; }, absl::Seconds(5)));
  for (const Lease& l : leases) {
    EXPECT_EQ(env.Server({"EXISTS", keys.LockKey(l.resource)}), Reply::Integer(0));
  }
}

}  // namespace

namespace testing {
using ClusterEnvs = ::testing::Types<ClusterEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisCluster, LockBehaviorTest, ClusterEnvs);
}  // namespace testing
}  // namespace dlock
