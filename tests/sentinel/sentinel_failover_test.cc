// Sentinel with real processes (SentinelDeployment: a master, 2 replicas, 3
// sentinels on loopback): discovery through a redis-sentinel:// URL, clear
// errors for a wrong master name or unreachable sentinels, and locks held
// and acquired across `SENTINEL FAILOVER` and a kill -9 of the master. With
// replica acknowledgement of every replica, a lease held across a failover
// is still held on the new master (nobody else gets it) or is reported lost,
// and fences keep rising across the failover.
#include <uv.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/blocking/connect.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/transport/uv/uv_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::SentinelDeployment;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

class SentinelFailoverTest : public ::testing::Test {
 protected:
  void TearDown() override {
    locks_.clear();
    for (auto& t : transports_) t->Close();
    transports_.clear();
    events_.reset();
    EXPECT_EQ(loop_.Close(), 0);
  }

  void StartDeployment() {
    absl::StatusOr<std::unique_ptr<SentinelDeployment>> d = SentinelDeployment::Start();
    ASSERT_THAT(d, IsOk());
    deployment_ = *std::move(d);
  }

  // A connected client of `url`.
  UvTransport* Client(const std::string& url) {
    absl::StatusOr<RedisUrl> parsed = ParseRedisUrl(url);
    EXPECT_THAT(parsed, IsOk());
    if (!parsed.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<UvTransport>> t =
        UvTransport::Create(loop_.get(), TransportOptionsForUrl(*parsed));
    EXPECT_THAT(t, IsOk());
    if (!t.ok()) return nullptr;
    transports_.push_back(*std::move(t));
    return transports_.back().get();
  }

  absl::Status ConnectNow(UvTransport* t) {
    std::optional<absl::Status> result;
    absl::Status s = t->Connect([&](absl::Status st) { result = st; });
    if (!s.ok()) return s;
    EXPECT_TRUE(loop_.RunUntil([&] { return result.has_value(); }, absl::Seconds(20)));
    return result.value_or(absl::DeadlineExceededError("no Connect answer"));
  }

  SimpleLock* Lock(Transport* t, int min_replicas) {
    SimpleLockOptions o;
    o.replica_ack = ReplicaAck(min_replicas);
    o.replica_ack.timeout = absl::Milliseconds(500);
    locks_.push_back(std::make_unique<SimpleLock>(events_.get(), t, o));
    return locks_.back().get();
  }

  absl::StatusOr<Lease> AcquireNow(SimpleLock* lock, const std::string& resource) {
    std::optional<absl::StatusOr<Lease>> out;
    AcquireOptions o;
    o.ttl = absl::Seconds(120);  // outlives any failover here
    absl::StatusOr<AcquireHandle> h =
        lock->Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!h.ok()) return h.status();
    loop_.RunUntil([&] { return out.has_value(); }, absl::Seconds(10));
    return out.value_or(absl::DeadlineExceededError("no answer"));
  }

  absl::StatusOr<Lease> ExtendNow(SimpleLock* lock, const Lease& lease) {
    std::optional<absl::StatusOr<Lease>> out;
    absl::Status s = lock->Extend(lease, absl::Seconds(120),
                                  [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!s.ok()) return s;
    loop_.RunUntil([&] { return out.has_value(); }, absl::Seconds(10));
    return out.value_or(absl::DeadlineExceededError("no answer"));
  }

  // Runs `fn` on another thread while this one runs the loop (clients keep
  // working during a failover).
  template <typename Fn>
  auto WhileLoopRuns(Fn fn) {
    auto future = std::async(std::launch::async, std::move(fn));
    loop_.RunUntil(
        [&] {
          return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
        },
        absl::Seconds(60));
    return future.get();
  }

  // Runs the loop until `t` talks to data node `index`.
  bool FollowsTo(UvTransport* t, int index) {
    const std::string want = absl::StrCat("127.0.0.1:", deployment_->data(index).port());
    return loop_.RunUntil(
        [&] { return t->sentinel()->master_address() == want && t->connected(); },
        absl::Seconds(20));
  }

  std::unique_ptr<SentinelDeployment> deployment_;
  dlock::test_support::UvTestLoop loop_;
  std::unique_ptr<UvEventLoop> events_ = std::make_unique<UvEventLoop>(loop_.get());
  std::vector<std::unique_ptr<UvTransport>> transports_;
  std::vector<std::unique_ptr<SimpleLock>> locks_;
  KeyScheme keys_;
};

TEST_F(SentinelFailoverTest, DiscoversTheMasterAndConfirmsItsRole) {
  StartDeployment();
  UvTransport* t = Client(deployment_->url());
  ASSERT_THAT(ConnectNow(t), IsOk());
  EXPECT_EQ(t->sentinel()->master_address(),
            absl::StrCat("127.0.0.1:", deployment_->data(0).port()));
  absl::StatusOr<Lease> lease = AcquireNow(Lock(t, 2), "discovered");
  ASSERT_THAT(lease, IsOk());
  // The key is on the master, and (acknowledged) on both replicas.
  for (int i = 0; i < deployment_->data_count(); ++i) {
    absl::StatusOr<Reply> v = deployment_->data(i).Command({"GET", keys_.LockKey("discovered")});
    ASSERT_THAT(v, IsOk());
    EXPECT_EQ(v->str, lease->token) << "data node " << i;
  }
}

TEST_F(SentinelFailoverTest, WrongMasterNameIsAClearUnavailable) {
  StartDeployment();
  std::string url = deployment_->url();
  url = url.substr(0, url.rfind('/')) + "/nosuchmaster";
  UvTransport* t = Client(url);
  absl::Status s = ConnectNow(t);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("knows no master named 'nosuchmaster'"));
  // Commands fail (on a later turn) rather than go anywhere.
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT(t->Send({"SET", "k", "v"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  EXPECT_FALSE(r.has_value());
  loop_.RunUntil([&] { return r.has_value(); });
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(SentinelFailoverTest, UnreachableSentinelsAreAClearUnavailable) {
  // Port 1 on loopback: refused at once (nothing listens there).
  UvTransport* t = Client("redis-sentinel://127.0.0.1:1,127.0.0.1:2/mymaster");
  absl::Status s = ConnectNow(t);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(s.message(), HasSubstr("sentinel 127.0.0.1:1"));
  EXPECT_THAT(s.message(), HasSubstr("sentinel 127.0.0.1:2"));
}

TEST_F(SentinelFailoverTest, HeldLeaseSurvivesSentinelFailoverWithReplicaAck) {
  StartDeployment();
  UvTransport* holder_conn = Client(deployment_->url());
  UvTransport* rival_conn = Client(deployment_->url());
  ASSERT_THAT(ConnectNow(holder_conn), IsOk());
  ASSERT_THAT(ConnectNow(rival_conn), IsOk());
  SimpleLock* holder = Lock(holder_conn, 2);
  SimpleLock* rival = Lock(rival_conn, 2);
  absl::StatusOr<Lease> held = AcquireNow(holder, "order-42");
  ASSERT_THAT(held, IsOk());

  // Release notifications must follow the master.
  std::vector<std::string> messages;
  std::optional<absl::Status> ready;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = rival_conn->Subscribe(
      "news", [&](absl::string_view, absl::string_view m) { messages.emplace_back(m); },
      [&](absl::Status s) { ready = s; });
  ASSERT_THAT(sub, IsOk());
  loop_.RunUntil([&] { return ready.has_value(); });
  ASSERT_THAT(*ready, IsOk());

  absl::StatusOr<int> old_master = deployment_->MasterIndex();
  ASSERT_THAT(old_master, IsOk());
  absl::Status failover = WhileLoopRuns([this] { return deployment_->Failover(); });
  ASSERT_THAT(failover, IsOk());
  absl::StatusOr<int> new_master = deployment_->MasterIndex();
  ASSERT_THAT(new_master, IsOk());
  ASSERT_NE(*new_master, *old_master);
  ASSERT_TRUE(FollowsTo(holder_conn, *new_master) || FollowsTo(holder_conn, *new_master))
      << holder_conn->sentinel()->last_error();
  ASSERT_TRUE(FollowsTo(rival_conn, *new_master)) << rival_conn->sentinel()->last_error();
  // Counted from here: the scripts below are the first on the new master.
  ASSERT_THAT(deployment_->data(*new_master).Command({"CONFIG", "RESETSTAT"}), IsOk());

  // The other replica follows the new master within the failover; the old
  // master rejoins as a replica only later (Sentinel converts it after its
  // next INFO, ~10 s, and it resyncs), so the extend asks for one.
  ASSERT_THAT(WhileLoopRuns([this] { return deployment_->WaitForReplicas(1); }), IsOk());
  // Nobody else gets the lock; the holder still holds it.
  absl::StatusOr<Lease> stolen = AcquireNow(rival, "order-42");
  EXPECT_THAT(stolen, StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<Lease> extended = ExtendNow(Lock(holder_conn, 1), *held);
  EXPECT_THAT(extended, IsOk());
  // Issue 22: each connection to the new master loaded its scripts right
  // before their first EVALSHA there; none met NOSCRIPT, and no EVAL was
  // sent a round trip later, behind commands sent after it.
  absl::StatusOr<Reply> errors = deployment_->data(*new_master).Command({"INFO", "errorstats"});
  ASSERT_THAT(errors, IsOk());
  EXPECT_THAT(errors->str, Not(HasSubstr("errorstat_NOSCRIPT"))) << errors->str;
  absl::StatusOr<Reply> commands =
      deployment_->data(*new_master).Command({"INFO", "commandstats"});
  ASSERT_THAT(commands, IsOk());
  EXPECT_THAT(commands->str, HasSubstr("cmdstat_script|load:"));
  EXPECT_THAT(commands->str, Not(HasSubstr("cmdstat_eval:")));

  // The subscription moved to the new master.
  loop_.RunUntil([&] {
    return deployment_->data(*new_master).Command({"PUBSUB", "NUMSUB", "news"})->elements[1].integer > 0;
  }, absl::Seconds(5));
  ASSERT_THAT(deployment_->data(*new_master).Command({"PUBLISH", "news", "hello"}), IsOk());
  EXPECT_TRUE(loop_.RunUntil([&] { return !messages.empty(); }, absl::Seconds(5)));
  sub->reset();
}

TEST_F(SentinelFailoverTest, KillMinusNineOfTheMasterIsFollowed) {
  StartDeployment();
  UvTransport* t = Client(deployment_->url());
  ASSERT_THAT(ConnectNow(t), IsOk());
  SimpleLock* lock = Lock(t, 2);
  absl::StatusOr<Lease> held = AcquireNow(lock, "job");
  ASSERT_THAT(held, IsOk());
  absl::StatusOr<int> old_master = deployment_->MasterIndex();
  ASSERT_THAT(old_master, IsOk());
  ASSERT_THAT(deployment_->data(*old_master).Kill(), IsOk());
  // A command sent to the dead master fails; none is re-sent elsewhere.
  absl::StatusOr<Lease> during = AcquireNow(lock, "other");
  EXPECT_FALSE(during.ok());
  absl::StatusOr<int> new_master =
      WhileLoopRuns([&] { return deployment_->WaitForNewMaster(*old_master); });
  ASSERT_THAT(new_master, IsOk());
  ASSERT_TRUE(FollowsTo(t, *new_master)) << t->sentinel()->last_error();
  // The held lease was acknowledged by both replicas: still held (extended
  // with the one replica left acknowledging).
  SimpleLock* one = Lock(t, 1);
  EXPECT_THAT(ExtendNow(one, *held), IsOk());
  // New grants go to the new master; with one replica left, asking for 2
  // acknowledgements is refused and leaves nothing behind.
  absl::StatusOr<Lease> two = AcquireNow(lock, "after");
  EXPECT_THAT(two, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(IsReplicaShortfall(two.status())) << two.status();
  // Its key is released in the background.
  EXPECT_TRUE(loop_.RunUntil([&] {
    absl::StatusOr<Reply> r =
        deployment_->data(*new_master).Command({"EXISTS", keys_.LockKey("after")});
    return r.ok() && r->integer == 0;
  }));
  EXPECT_THAT(AcquireNow(one, "after"), IsOk());
}


// Issue 23, goal 1: fences never go backwards for a resource across a
// failover with replica acknowledgement. Fences come from the master's one
// fence mark (lock/keys.h), which every acknowledged grant wrote to both
// replicas before it counted; the promoted replica issues above it. The
// deployment's data set is trusted (marker 0), so a mark lost in the
// failover would restart fences at 1: the test would see it.
TEST_F(SentinelFailoverTest, FencesRiseAcrossAKillMinusNineFailoverWithReplicaAck) {
  StartDeployment();
  UvTransport* t = Client(deployment_->url());
  ASSERT_THAT(ConnectNow(t), IsOk());
  SimpleLock* lock = Lock(t, 2);
  int64_t last = 0;
  for (const char* resource : {"order-1", "order-2", "order-1", "order-3"}) {
    absl::StatusOr<Lease> lease = AcquireNow(lock, resource);
    ASSERT_THAT(lease, IsOk()) << resource;
    EXPECT_GT(lease->fence, last) << resource;
    last = lease->fence;
    std::optional<absl::Status> released;
    ASSERT_THAT(lock->Release(*lease, [&](absl::Status st) { released = st; }), IsOk());
    ASSERT_TRUE(loop_.RunUntil([&] { return released.has_value(); }, absl::Seconds(10)));
    ASSERT_THAT(*released, IsOk());
  }
  absl::StatusOr<int> old_master = deployment_->MasterIndex();
  ASSERT_THAT(old_master, IsOk());
  ASSERT_THAT(deployment_->data(*old_master).Kill(), IsOk());
  absl::StatusOr<int> new_master =
      WhileLoopRuns([&] { return deployment_->WaitForNewMaster(*old_master); });
  ASSERT_THAT(new_master, IsOk());
  ASSERT_TRUE(FollowsTo(t, *new_master)) << t->sentinel()->last_error();
  // One replica is left to acknowledge. Every resource, those locked before
  // and a new one, gets a fence above every fence issued before the crash.
  SimpleLock* one = Lock(t, 1);
  for (const char* resource : {"order-1", "order-3", "order-4"}) {
    absl::StatusOr<Lease> lease = AcquireNow(one, resource);
    ASSERT_THAT(lease, IsOk()) << resource;
    EXPECT_GT(lease->fence, last) << resource << " after the failover";
    last = lease->fence;
  }
}


TEST_F(SentinelFailoverTest, BlockingClientTakesASentinelUrlAndMinReplicas) {
  StartDeployment();
  ConnectOptions o;
  o.redis_urls = {deployment_->url()};
  o.min_replicas = 2;
  o.auto_renew = false;
  absl::StatusOr<std::unique_ptr<BlockingClient>> client = ConnectBlockingClient(o);
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<LockGuard> guard = (*client)->TryLock("blocking", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  // Three acknowledgements cannot come from two replicas: refused, and the
  // key is given back.
  o.min_replicas = 3;
  o.replica_ack_timeout = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<BlockingClient>> greedy = ConnectBlockingClient(o);
  ASSERT_THAT(greedy, IsOk());
  absl::StatusOr<LockGuard> refused = (*greedy)->TryLock("other", absl::Seconds(10));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(IsReplicaShortfall(refused.status())) << refused.status();
}

}  // namespace
}  // namespace dlock
