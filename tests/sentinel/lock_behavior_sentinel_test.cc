// The lock behaviour suite (lock/lock_behavior_suite.h: SimpleLock,
// RetryLock with release wake-ups, ReentrantLock, fencing, bad input) on a
// real Sentinel deployment (SentinelDeployment: a master, 2 replicas, 3
// sentinels) through SentinelTransport, unchanged. One deployment per test
// process; each test starts from a master holding only the trusted data-set
// marker. Also: the watchdog renewing leases through SentinelTransport.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lock_behavior_suite.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/transport/uv/sentinel_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/watchdog/renewal_check.h"

namespace dlock {
namespace {

test_support::SentinelDeployment* SharedDeployment() {
  static test_support::SentinelDeployment* deployment = [] {
    auto d = test_support::SentinelDeployment::Start();
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      return static_cast<test_support::SentinelDeployment*>(nullptr);
    }
    return d->release();  // lives for the process; its processes die with it
  }();
  return deployment;
}

class SentinelEnv : public test_support::LockTestEnv {
 public:
  SentinelEnv()
      : deployment_(SharedDeployment()), loop_(std::make_unique<UvEventLoop>(uv_.get())) {
    if (deployment_ == nullptr) return;
    absl::StatusOr<int> master = deployment_->MasterIndex();
    EXPECT_TRUE(master.ok()) << master.status();
    if (!master.ok()) return;
    master_ = &deployment_->data(*master);
    // Only the trusted data-set marker stays from earlier tests (what a
    // fresh RedisServer holds); replicated to the replicas like any write.
    KeyScheme keys;
    EXPECT_TRUE(master_->Command({"FLUSHALL"}).ok());
    EXPECT_TRUE(master_->Command({"SET", keys.DataSetKey(), "0"}).ok());
  }

  ~SentinelEnv() override {
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);
  }

  EventLoop* loop() override { return loop_.get(); }

  // A SentinelTransport that discovered and confirmed the master.
  Transport* NewClient() override {
    SentinelTransportOptions o;
    if (deployment_ != nullptr) {
      o.master_name = deployment_->master_name();
      for (int i = 0; i < deployment_->sentinel_count(); ++i) {
        o.sentinels.push_back({"127.0.0.1", deployment_->sentinel(i).port()});
      }
    }
    auto t = SentinelTransport::Create(uv_.get(), std::move(o));
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return nullptr;
    clients_.push_back(*std::move(t));
    absl::Status up = uv_.ConnectAndWait(*clients_.back());
    EXPECT_TRUE(up.ok()) << up;
    if (master_ != nullptr) {
      EXPECT_EQ(clients_.back()->master_address(), absl::StrCat("127.0.0.1:", master_->port()));
    }
    return clients_.back().get();
  }

  bool RunUntil(const std::function<bool()>& done, absl::Duration limit) override {
    return uv_.RunUntil(done, limit);
  }
  void RunFor(absl::Duration d) override { uv_.RunFor(d); }

  // On the master the sentinels name.
  Reply Server(std::vector<std::string> argv) override {
    if (master_ == nullptr) return Reply::Error("no master");
    absl::StatusOr<Reply> r = master_->Command(std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  // Subscriptions live on the master (SentinelTransport subscribes there).
  int64_t Subscribers(const std::string& channel) override {
    Reply r = Server({"PUBSUB", "NUMSUB", channel});
    return r.is_array() && r.elements.size() == 2 ? r.elements[1].integer : -1;
  }

  absl::Duration round_trip() const override { return absl::Milliseconds(250); }

 private:
  test_support::SentinelDeployment* const deployment_;
  test_support::RedisServer* master_ = nullptr;
  test_support::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<std::unique_ptr<SentinelTransport>> clients_;
};

// The watchdog keeps leases alive past their ttl through SentinelTransport,
// and stops at release.
TEST(SentinelWatchdogTest, RenewsLeasesPastTheirTtl) {
  SentinelEnv env;
  test_support::ExpectWatchdogKeepsLeases(env, env.NewClient(), 10);
}

}  // namespace

namespace test_support {
using SentinelEnvs = ::testing::Types<SentinelEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(RedisSentinel, LockBehaviorTest, SentinelEnvs);
}  // namespace test_support
}  // namespace dlock
