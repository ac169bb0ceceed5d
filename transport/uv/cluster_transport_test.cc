// ClusterTransport on a real 3 + 3 Redis Cluster (//testing:redis_cluster):
// routing across all slots, the cross-slot refusal, locks held and acquired
// while a slot migrates (TRYAGAIN, ASK, then MOVED), and a master failing
// over while a lock is held (MOVED from the demoted master, NOSCRIPT on the
// promoted one, no second holder, fences still increasing).
//
// One cluster per test process (the tests share it, in order); run the
// migration and failover tests repeatedly with --runs_per_test=10.
#include "dlock/transport/uv/cluster_transport.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/uv/cluster_uv.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

test_support::RedisCluster* cluster = nullptr;

class ClusterTransportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = test_support::RedisCluster::Start({});
    ASSERT_TRUE(c.ok()) << c.status();
    cluster = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster;
    cluster = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster, nullptr);
    loop_ = std::make_unique<UvEventLoop>(uv_.get());
  }

  void TearDown() override {
    locks_.clear();
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    EXPECT_EQ(uv_.Close(), 0);  // every handle closed
  }

  ClusterTransport* NewClient(std::vector<int> seeds = {0, 1, 2}) {
    ClusterUvOptions o;
    for (int i : seeds) o.cluster.seeds.push_back({"127.0.0.1", cluster->node(i).port()});
    auto t = CreateUvClusterTransport(uv_.get(), std::move(o));
    EXPECT_TRUE(t.ok()) << t.status();
    clients_.push_back(*std::move(t));
    EXPECT_THAT(uv_.ConnectAndWait(*clients_.back()), IsOk());
    return clients_.back().get();
  }

  SimpleLock* NewLock(Transport* t) {
    SimpleLockOptions o;
    o.restart_window = absl::Seconds(5);  // the trusted per-slot markers pass
    locks_.push_back(std::make_unique<SimpleLock>(loop_.get(), t, o));
    return locks_.back().get();
  }

  absl::StatusOr<Reply> SendNow(Transport* t, std::vector<std::string> argv) {
    bool done = false;
    absl::StatusOr<Reply> out = absl::UnknownError("not run");
    absl::Status s = t->Send(std::move(argv), absl::Seconds(5), [&](absl::StatusOr<Reply> r) {
      out = std::move(r);
      done = true;
    });
    if (!s.ok()) return s;
    EXPECT_FALSE(done) << "callback inside Send";
    EXPECT_TRUE(uv_.RunUntil([&] { return done; }));
    return out;
  }

  absl::StatusOr<Lease> AcquireNow(Lock* lock, const std::string& resource,
                                   absl::Duration ttl = absl::Seconds(30)) {
    bool done = false;
    absl::StatusOr<Lease> out = absl::UnknownError("not run");
    AcquireOptions o;
    o.ttl = ttl;
    auto h = lock->Acquire(resource, o, [&](absl::StatusOr<Lease> r) {
      out = std::move(r);
      done = true;
    });
    if (!h.ok()) return h.status();
    EXPECT_TRUE(uv_.RunUntil([&] { return done; }));
    return out;
  }

  absl::Status ReleaseNow(Lock* lock, const Lease& lease) {
    bool done = false;
    absl::Status out = absl::UnknownError("not run");
    absl::Status s = lock->Release(lease, [&](absl::Status r) {
      out = r;
      done = true;
    });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return done; }));
    return out;
  }

  absl::StatusOr<Lease> ExtendNow(Lock* lock, const Lease& lease) {
    bool done = false;
    absl::StatusOr<Lease> out = absl::UnknownError("not run");
    absl::Status s = lock->Extend(lease, absl::Seconds(30), [&](absl::StatusOr<Lease> r) {
      out = std::move(r);
      done = true;
    });
    if (!s.ok()) return s;
    EXPECT_TRUE(uv_.RunUntil([&] { return done; }));
    return out;
  }

  // `count` resource names whose keys are in `slot`.
  static std::vector<std::string> NamesInSlot(int slot, int count) {
    std::vector<std::string> out;
    KeyScheme keys;
    for (int i = 0; static_cast<int>(out.size()) < count; ++i) {
      std::string r = absl::StrCat("res-", i);
      if (KeySlot(keys.LockKey(r)) == slot) out.push_back(r);
    }
    return out;
  }

  // A master other than `not_this`.
  static int OtherMaster(int not_this) {
    for (int s = 0; s < kClusterSlots; s += 1000) {
      auto o = cluster->OwnerOf(s);
      if (o.ok() && *o != not_this) return *o;
    }
    return -1;
  }

  test_support::UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<std::unique_ptr<ClusterTransport>> clients_;
  std::vector<std::unique_ptr<SimpleLock>> locks_;
};

TEST_F(ClusterTransportTest, RoutesEveryCommandToItsSlotsMaster) {
  ClusterTransport* t = NewClient();
  EXPECT_TRUE(t->cluster());
  EXPECT_EQ(t->Masters().size(), 3u);
  for (int i = 0; i < 300; ++i) {
    const std::string key = absl::StrCat("k", i);
    ASSERT_THAT(SendNow(t, {"SET", key, absl::StrCat(i)}), IsOk());
    auto owner = cluster->OwnerOf(KeySlot(key));
    ASSERT_TRUE(owner.ok());
    auto direct = cluster->Command(*owner, {"GET", key});
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(direct->str, absl::StrCat(i)) << key;  // on the owner itself
  }
  EXPECT_EQ(t->moved_count(), 0u);
  auto pong = SendNow(t, {"PING"});
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->str, "PONG");
}

TEST_F(ClusterTransportTest, AReplicaSeedGivesTheMapAndIsDropped) {
  auto master = cluster->OwnerOf(0);
  ASSERT_TRUE(master.ok());
  auto replica = cluster->ReplicaOf(*master);
  ASSERT_TRUE(replica.ok()) << replica.status();
  ClusterTransport* t = NewClient({*replica});
  EXPECT_EQ(t->Masters().size(), 3u);
  // The replica's connection carried the map and was closed in its own
  // reply callback; one connection per master is left.
  EXPECT_EQ(t->node_connections(), 3u);
  ASSERT_THAT(SendNow(t, {"SET", "via-replica-seed", "1"}), IsOk());
  EXPECT_EQ(t->moved_count(), 0u);
}

TEST_F(ClusterTransportTest, RefusesCrossSlotScriptsBeforeSending) {
  ClusterTransport* t = NewClient();
  bool ran = false;
  EXPECT_THAT(t->Send({"EVAL", "return 1", "2", "a", "b"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply>) { ran = true; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(t->Send({"EVAL", "return 1", "3", "a"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply>) { ran = true; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto same = SendNow(t, {"EVAL", "return #KEYS", "2", "{a}1", "{a}2"});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->integer, 2);
  uv_.RunFor(absl::Milliseconds(20));
  EXPECT_FALSE(ran);
}

TEST_F(ClusterTransportTest, EveryPolicyLocksAcrossTheSlots) {
  ClusterTransport* a = NewClient();
  ClusterTransport* b = NewClient();
  SimpleLock* la = NewLock(a);
  SimpleLock* lb = NewLock(b);
  KeyScheme keys;
  std::vector<bool> slot_seen(kClusterSlots);
  int slots = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string r = i % 50 == 0 ? absl::StrCat("}", i) : absl::StrCat("order/", i);
    auto lease = AcquireNow(la, r);
    ASSERT_THAT(lease.status(), IsOk()) << r;
    EXPECT_THAT(AcquireNow(lb, r).status(), StatusIs(absl::StatusCode::kAborted)) << r;
    EXPECT_THAT(ReleaseNow(la, *lease), IsOk()) << r;
    const int s = KeySlot(keys.LockKey(r));
    if (!slot_seen[s]) ++slots;
    slot_seen[s] = true;
  }
  EXPECT_GT(slots, 350);
  EXPECT_EQ(a->moved_count() + b->moved_count(), 0u);

  // ReentrantLock (nested by one owner, refused to another) and RetryLock
  // (woken by the release notification across the cluster) on 100 more.
  ReentrantLock ra(loop_.get(), a);
  ReentrantLock rb(loop_.get(), b);
  RetryLockOptions ro;
  ro.initial_backoff = absl::Seconds(20);  // only a notification wakes it in time
  ro.max_backoff = absl::Seconds(20);
  RetryLock waiter(loop_.get(), lb, ro);  // subscribes through lb's transport
  for (int i = 0; i < 100; ++i) {
    const std::string r = absl::StrCat("nested/", i);
    AcquireOptions o;
    o.ttl = absl::Seconds(30);
    o.task_id = "task";
    bool done = false;
    absl::StatusOr<Lease> outer, inner, other;
    auto acquire = [&](Lock& lock, absl::StatusOr<Lease>* out) {
      done = false;
      ASSERT_TRUE(lock.Acquire(r, o, [&](absl::StatusOr<Lease> l) {
                      *out = std::move(l);
                      done = true;
                    }).ok());
      ASSERT_TRUE(uv_.RunUntil([&] { return done; }));
    };
    acquire(ra, &outer);
    ASSERT_THAT(outer.status(), IsOk()) << r;
    acquire(ra, &inner);
    ASSERT_THAT(inner.status(), IsOk()) << r;
    acquire(rb, &other);
    EXPECT_THAT(other.status(), StatusIs(absl::StatusCode::kAborted)) << r;
    EXPECT_THAT(ReleaseNow(&ra, *inner), IsOk());
    EXPECT_THAT(ReleaseNow(&ra, *outer), IsOk());
  }
  for (int i = 0; i < 20; ++i) {
    const std::string r = absl::StrCat("waited/", i);
    auto held = AcquireNow(la, r);
    ASSERT_THAT(held.status(), IsOk());
    AcquireOptions o;
    o.ttl = absl::Seconds(30);
    o.wait = absl::Seconds(30);
    bool done = false;
    absl::StatusOr<Lease> got;
    ASSERT_TRUE(waiter.Acquire(r, o, [&](absl::StatusOr<Lease> l) {
                    got = std::move(l);
                    done = true;
                  }).ok());
    uv_.RunFor(absl::Milliseconds(30));
    EXPECT_FALSE(done);
    EXPECT_THAT(ReleaseNow(la, *held), IsOk());
    ASSERT_TRUE(uv_.RunUntil([&] { return done; }, absl::Seconds(5)));
    ASSERT_THAT(got.status(), IsOk()) << r;
    EXPECT_THAT(ReleaseNow(&waiter, *got), IsOk());
  }
}

TEST_F(ClusterTransportTest, SlotMigrationWhileLocksAreHeldAndAcquired) {
  ClusterTransport* a = NewClient();
  ClusterTransport* b = NewClient();
  SimpleLock* la = NewLock(a);
  SimpleLock* lb = NewLock(b);
  KeyScheme keys;
  const std::vector<std::string> names = NamesInSlot(KeySlot(keys.LockKey("held")), 1);
  const std::string held = "held";
  const int slot = KeySlot(keys.LockKey(held));
  auto from = cluster->OwnerOf(slot);
  ASSERT_TRUE(from.ok());
  const int to = OtherMaster(*from);
  ASSERT_GE(to, 0);

  auto lease = AcquireNow(la, held);
  ASSERT_THAT(lease.status(), IsOk());

  // MIGRATING/IMPORTING: every key is still on the old owner.
  ASSERT_THAT(cluster->BeginSlotMigration(slot, to), IsOk());
  EXPECT_THAT(AcquireNow(lb, held).status(), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(ExtendNow(la, *lease).status(), IsOk());

  // Half the slot has moved (the held lock's keys, the marker): keys still
  // on the old owner are served there, moved ones after ASK.
  ASSERT_THAT(cluster->MigrateKeys(slot, to), IsOk());
  const uint64_t asks = a->ask_count() + b->ask_count();
  EXPECT_THAT(AcquireNow(lb, held).status(), StatusIs(absl::StatusCode::kAborted));
  auto extended = ExtendNow(la, *lease);
  ASSERT_THAT(extended.status(), IsOk());
  EXPECT_GT(a->ask_count() + b->ask_count(), asks);
  ASSERT_TRUE(cluster->Command(to, {"ASKING"}).ok());  // same connection
  auto on_target = cluster->Command(to, {"GET", keys.LockKey(held)});
  ASSERT_TRUE(on_target.ok());
  EXPECT_EQ(on_target->str, lease->token);

  // A new resource of the slot: its keys exist on neither node, so both
  // answer TRYAGAIN to the multi-key script until the migration ends; the
  // acquire keeps asking within its deadline.
  bool done = false;
  absl::StatusOr<Lease> fresh = absl::UnknownError("not run");
  AcquireOptions o;
  o.ttl = absl::Seconds(30);
  ASSERT_TRUE(lb->Acquire(names[0], o, [&](absl::StatusOr<Lease> r) {
                  fresh = std::move(r);
                  done = true;
                }).ok());
  uv_.RunFor(absl::Milliseconds(200));
  EXPECT_FALSE(done);
  // SETSLOT NODE: the waiting acquire goes through; MOVED, then the new map.
  ASSERT_THAT(cluster->FinishSlotMigration(slot, to), IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return done; }));
  ASSERT_THAT(fresh.status(), IsOk());
  EXPECT_THAT(ReleaseNow(la, *extended), IsOk());
  auto after = AcquireNow(lb, held);
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_GT(after->fence, lease->fence);
  EXPECT_GT(a->moved_count() + b->moved_count(), 0u);
  EXPECT_EQ(a->OwnerOf(slot), cluster->node(to).address());
  EXPECT_EQ(b->OwnerOf(slot), cluster->node(to).address());
  EXPECT_THAT(ReleaseNow(lb, *after), IsOk());
  EXPECT_THAT(ReleaseNow(lb, *fresh), IsOk());
}

TEST_F(ClusterTransportTest, FailoverWhileHolding) {
  ClusterTransport* a = NewClient();
  ClusterTransport* b = NewClient();
  SimpleLock* la = NewLock(a);
  SimpleLock* lb = NewLock(b);
  KeyScheme keys;
  const std::string r = "failover-resource";
  const int slot = KeySlot(keys.LockKey(r));
  auto lease = AcquireNow(la, r);
  ASSERT_THAT(lease.status(), IsOk());
  auto master = cluster->OwnerOf(slot);
  ASSERT_TRUE(master.ok());

  // The replica never ran the extend script (a master replicates a
  // script's effects, not the script): its cache lacks it.
  const std::string extend_sha = ExtendScript().sha1();
  auto replica = cluster->ReplicaOf(*master);
  ASSERT_TRUE(replica.ok()) << replica.status();
  auto cached = cluster->Command(*replica, {"SCRIPT", "EXISTS", extend_sha});
  ASSERT_TRUE(cached.ok() && cached->is_array());
  EXPECT_EQ(cached->elements[0].integer, 0);

  auto promoted = cluster->Failover(*master);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  // Counted from here: the scripts below are the first on the promoted node.
  ASSERT_TRUE(cluster->Command(*promoted, {"CONFIG", "RESETSTAT"}).ok());

  // Still held: no second holder after the failover.
  EXPECT_THAT(AcquireNow(lb, r).status(), StatusIs(absl::StatusCode::kAborted));
  // MOVED from the demoted master; on the promoted one, whose cache is
  // empty, the script is loaded right before its EVALSHA (issue 22).
  auto extended = ExtendNow(la, *lease);
  ASSERT_THAT(extended.status(), IsOk());
  cached = cluster->Command(*promoted, {"SCRIPT", "EXISTS", extend_sha});
  ASSERT_TRUE(cached.ok() && cached->is_array());
  EXPECT_EQ(cached->elements[0].integer, 1);
  EXPECT_GT(a->moved_count(), 0u);
  // No script met NOSCRIPT there, and none was sent as EVAL a round trip
  // later (behind whatever was sent after it).
  auto errors = cluster->Command(*promoted, {"INFO", "errorstats"});
  ASSERT_TRUE(errors.ok());
  EXPECT_FALSE(absl::StrContains(errors->str, "errorstat_NOSCRIPT")) << errors->str;
  auto commands = cluster->Command(*promoted, {"INFO", "commandstats"});
  ASSERT_TRUE(commands.ok());
  EXPECT_TRUE(absl::StrContains(commands->str, "cmdstat_script|load:")) << commands->str;
  EXPECT_FALSE(absl::StrContains(commands->str, "cmdstat_eval:")) << commands->str;
  EXPECT_THAT(ReleaseNow(la, *extended), IsOk());
  auto next = AcquireNow(lb, r);
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_GT(next->fence, lease->fence);
  EXPECT_EQ(b->OwnerOf(slot), cluster->node(*promoted).address());
  EXPECT_THAT(ReleaseNow(lb, *next), IsOk());
}

TEST_F(ClusterTransportTest, CloseCancelsPendingCommandsSynchronously) {
  ClusterTransport* t = NewClient();
  int cancelled = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(t->Send({"GET", absl::StrCat("c", i)}, absl::Seconds(5),
                        [&](absl::StatusOr<Reply> r) {
                          EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kCancelled));
                          ++cancelled;
                        }),
                IsOk());
  }
  t->Close();
  EXPECT_EQ(cancelled, 10);
  EXPECT_THAT(t->Send({"PING"}, absl::Seconds(1), [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kCancelled));
}

// Last: it kills a master for good.
TEST_F(ClusterTransportTest, MasterKilledWhileHoldingAfterWait) {
  ClusterTransport* a = NewClient();
  ClusterTransport* b = NewClient();
  SimpleLock* la = NewLock(a);
  SimpleLock* lb = NewLock(b);
  KeyScheme keys;
  const std::string r = "killed-master-resource";
  const int slot = KeySlot(keys.LockKey(r));
  auto lease = AcquireNow(la, r);
  ASSERT_THAT(lease.status(), IsOk());
  auto master = cluster->OwnerOf(slot);
  ASSERT_TRUE(master.ok());
  // Replication is asynchronous: WAIT until the replica has the lease (what
  // replica acknowledgement does), then kill -9 the master.
  auto acked = cluster->Command(*master, {"WAIT", "1", "5000"});
  ASSERT_TRUE(acked.ok());
  ASSERT_EQ(acked->integer, 1);
  ASSERT_THAT(cluster->node(*master).Kill(), IsOk());
  ASSERT_THAT(cluster->WaitHealthy(), IsOk());  // the replica took over

  // Commands to the dead master fail (kUnavailable, may have run: never
  // resent) until the refresh they start finds the promoted replica.
  absl::StatusOr<Lease> contended = absl::UnknownError("not run");
  for (int i = 0; i < 20; ++i) {
    contended = AcquireNow(lb, r);
    if (!absl::IsUnavailable(contended.status())) break;
    uv_.RunFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(contended.status(), StatusIs(absl::StatusCode::kAborted));  // still held
  absl::StatusOr<Lease> extended = absl::UnknownError("not run");
  for (int i = 0; i < 20; ++i) {
    extended = ExtendNow(la, *lease);
    if (!absl::IsUnavailable(extended.status())) break;
    uv_.RunFor(absl::Milliseconds(100));
  }
  ASSERT_THAT(extended.status(), IsOk());
  EXPECT_THAT(ReleaseNow(la, *extended), IsOk());
  auto next = AcquireNow(lb, r);
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_GT(next->fence, lease->fence);
  EXPECT_NE(b->OwnerOf(slot), cluster->node(*master).address());
}

}  // namespace
}  // namespace dlock
