// ClusterTransport's routing, unit-tested in virtual time on a FakeCluster:
// the slot map, MOVED, ASK + ASKING, TRYAGAIN until the deadline,
// CLUSTERDOWN, failover with NOSCRIPT, the async contract (never inside
// Send, exactly once, Close), and SimpleLock on top with per-slot markers.
#include "dlock/transport/fake/fake_cluster.h"

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/cluster_slot.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"
#include "dlock/transport/uv/cluster_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class FakeClusterTest : public ::testing::Test {
 protected:
  FakeClusterTest() : cluster_(&loop_, 3) {}

  std::unique_ptr<ClusterTransport> NewClient(ClusterTransportOptions o = {}) {
    if (o.seeds.empty()) o.seeds = {{"node0", 7000}};
    o.refresh_interval = absl::ZeroDuration();
    auto t = ClusterTransport::Create(
        &loop_, std::move(o),
        [this](const std::string& host, int port) {
          return cluster_.Connect(absl::StrCat(host, ":", port));
        });
    EXPECT_TRUE(t.ok()) << t.status();
    return *std::move(t);
  }

  absl::StatusOr<Reply> SendNow(Transport& t, std::vector<std::string> argv,
                                absl::Duration timeout = absl::Seconds(1)) {
    bool done = false;
    absl::StatusOr<Reply> out = absl::UnknownError("not run");
    absl::Status s = t.Send(std::move(argv), timeout, [&](absl::StatusOr<Reply> r) {
      EXPECT_FALSE(done) << "called back twice";
      out = std::move(r);
      done = true;
    });
    if (!s.ok()) return s;
    EXPECT_FALSE(done) << "called back inside Send";
    while (!done && loop_.RunNext()) {
    }
    EXPECT_TRUE(done);
    return out;
  }

  // Sets `key` through `t`, begins moving its slot to another node and
  // moves `key` there. Returns that node.
  std::string MoveKeyAway(Transport& t, const std::string& key) {
    EXPECT_THAT(SendNow(t, {"SET", key, "v"}).status(), IsOk());
    const std::string from = cluster_.OwnerOf(KeySlot(key));
    const std::string to = from == "node1:7001" ? "node2:7002" : "node1:7001";
    cluster_.BeginMigration(KeySlot(key), to);
    cluster_.MoveKey(key);
    return to;
  }

  int Count(const std::string& address, absl::string_view command) {
    int n = 0;
    for (const auto& argv : cluster_.received(address)) n += argv[0] == command ? 1 : 0;
    return n;
  }

  ManualEventLoop loop_;
  FakeCluster cluster_;
};

TEST_F(FakeClusterTest, LoadsTheMapAndRoutesBySlot) {
  auto t = NewClient();
  for (int i = 0; i < 100; ++i) {
    const std::string key = absl::StrCat("key", i);
    ASSERT_THAT(SendNow(*t, {"SET", key, "v"}).status(), IsOk());
    EXPECT_EQ(cluster_.node(cluster_.OwnerOf(KeySlot(key)))->Execute({"GET", key}),
              Reply::String("v"))
        << key;
  }
  EXPECT_EQ(t->topology_loads(), 1u);
  EXPECT_EQ(t->moved_count(), 0u);
  EXPECT_EQ(t->Masters(), cluster_.addresses());
}

TEST_F(FakeClusterTest, MovedUpdatesTheSlotAndResends) {
  auto t = NewClient();
  const std::string key = "moving";
  const int slot = KeySlot(key);
  const std::string from = cluster_.OwnerOf(slot);
  const std::string to = MoveKeyAway(*t, key);
  cluster_.FinishMigration(slot);  // the client was not told

  auto r = SendNow(*t, {"GET", key});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(*r, Reply::String("v"));
  EXPECT_EQ(t->moved_count(), 1u);
  EXPECT_EQ(t->OwnerOf(slot), to);
  loop_.RunUntilIdle();
  EXPECT_EQ(t->topology_loads(), 2u);  // MOVED started a refresh
  EXPECT_EQ(Count(to, "GET"), 1);
  EXPECT_EQ(Count(from, "GET"), 1);  // answered MOVED
}

TEST_F(FakeClusterTest, AskSendsAskingThenTheCommandToTheTargetOnce) {
  auto t = NewClient();
  const std::string key = "asked";
  const int slot = KeySlot(key);
  const std::string from = cluster_.OwnerOf(slot);
  const std::string to = MoveKeyAway(*t, key);

  auto r = SendNow(*t, {"GET", key});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(*r, Reply::String("v"));
  EXPECT_EQ(t->ask_count(), 1u);
  EXPECT_EQ(t->OwnerOf(slot), from);  // ASK does not change the map
  const auto& got = cluster_.received(to);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::vector<std::string>({"ASKING"}));
  EXPECT_EQ(got[1], std::vector<std::string>({"GET", key}));
  // The next command goes to the owner again (and is asked again).
  ASSERT_THAT(SendNow(*t, {"GET", key}).status(), IsOk());
  EXPECT_EQ(t->ask_count(), 2u);
}

TEST_F(FakeClusterTest, TryAgainIsRetriedUntilTheMigrationEndsOrTheDeadline) {
  auto t = NewClient();
  const int slot = KeySlot("{t}a");
  ASSERT_THAT(SendNow(*t, {"SET", "{t}a", "1"}).status(), IsOk());
  ASSERT_THAT(SendNow(*t, {"SET", "{t}b", "2"}).status(), IsOk());
  const std::string from = cluster_.OwnerOf(slot);
  const std::string to = from == "node1:7001" ? "node2:7002" : "node1:7001";
  cluster_.BeginMigration(slot, to);
  cluster_.MoveKey("{t}a");  // half the keys moved
  const std::vector<std::string> eval = {"EVAL", "return redis.call('get', KEYS[2])", "2",
                                         "{t}a", "{t}b"};
  // Never finishes: kDeadlineExceeded at the deadline, naming TRYAGAIN.
  const absl::Time start = loop_.Now();
  auto r = SendNow(*t, eval, absl::Milliseconds(300));
  EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("TRYAGAIN"));
  EXPECT_LE(loop_.Now() - start, absl::Milliseconds(350));

  // Finishes while the command keeps asking: it succeeds on the new owner.
  bool done = false;
  absl::StatusOr<Reply> out;
  ASSERT_THAT(t->Send(eval, absl::Seconds(2), [&](absl::StatusOr<Reply> x) {
    out = std::move(x);
    done = true;
  }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(120));
  EXPECT_FALSE(done);
  cluster_.MoveKey("{t}b");
  cluster_.FinishMigration(slot);
  while (!done && loop_.RunNext()) {
  }
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(*out, Reply::String("2"));
}

TEST_F(FakeClusterTest, ClusterDownIsRetriedWithinTheDeadline) {
  auto t = NewClient();
  ASSERT_THAT(SendNow(*t, {"SET", "k", "v"}).status(), IsOk());
  cluster_.SetDown(true);
  bool done = false;
  absl::StatusOr<Reply> out;
  ASSERT_THAT(t->Send({"GET", "k"}, absl::Seconds(1), [&](absl::StatusOr<Reply> x) {
    out = std::move(x);
    done = true;
  }), IsOk());
  loop_.AdvanceTime(absl::Milliseconds(200));
  EXPECT_FALSE(done);
  cluster_.SetDown(false);
  while (!done && loop_.RunNext()) {
  }
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(*out, Reply::String("v"));
}

TEST_F(FakeClusterTest, TheMapIsRefreshedPeriodically) {
  ClusterTransportOptions o;
  o.seeds = {{"node0", 7000}};
  o.refresh_interval = absl::Seconds(10);
  auto created = ClusterTransport::Create(
      &loop_, o, [this](const std::string& host, int port) {
        return cluster_.Connect(absl::StrCat(host, ":", port));
      });
  ASSERT_THAT(created.status(), IsOk());
  ClusterTransport& t = **created;
  loop_.RunUntilIdle();
  ASSERT_EQ(t.topology_loads(), 1u);
  cluster_.Assign(0, 99, "node2:7002");  // an operator's change, no MOVED seen
  loop_.AdvanceTime(absl::Seconds(9));
  EXPECT_EQ(t.OwnerOf(0), "node0:7000");
  loop_.AdvanceTime(absl::Seconds(1));
  EXPECT_EQ(t.topology_loads(), 2u);
  EXPECT_EQ(t.OwnerOf(0), "node2:7002");
  EXPECT_EQ(t.moved_count(), 0u);
  loop_.AdvanceTime(absl::Seconds(10));
  EXPECT_EQ(t.topology_loads(), 3u);
  t.Close();
  EXPECT_EQ(loop_.pending(), 0u);  // the periodic timer is gone
}

TEST_F(FakeClusterTest, CrossSlotScriptsAreRefusedAtOnce) {
  auto t = NewClient();
  bool ran = false;
  EXPECT_THAT(t->Send({"EVALSHA", "x", "2", "a", "b"}, absl::Seconds(1),
                      [&](absl::StatusOr<Reply>) { ran = true; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.AdvanceTime(absl::Seconds(2));
  EXPECT_FALSE(ran);
}

TEST_F(FakeClusterTest, FailoverLockStaysHeldAndScriptsAreReloaded) {
  auto t1 = NewClient();
  auto t2 = NewClient();
  SimpleLock a(&loop_, t1.get());
  SimpleLock b(&loop_, t2.get());
  KeyScheme keys{"dlock:", true};
  // Trust every slot (a fresh cluster), as `dlock trust` does.
  for (const auto& cmd : TrustClusterDataSetCommands(keys)) {
    cluster_.node(cluster_.OwnerOf(KeySlot(cmd[1])))->Execute(cmd);
  }
  auto acquire = [&](SimpleLock& lock, const std::string& r) {
    absl::StatusOr<Lease> out = absl::UnknownError("not run");
    bool done = false;
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    EXPECT_TRUE(lock.Acquire(r, o, [&](absl::StatusOr<Lease> l) {
      out = std::move(l);
      done = true;
    }).ok());
    while (!done && loop_.RunNext()) {
    }
    return out;
  };
  auto lease = acquire(a, "orders/7");
  ASSERT_THAT(lease.status(), IsOk());
  EXPECT_EQ(lease->fence, 1);
  const int slot = KeySlot(keys.LockKey("orders/7"));
  ASSERT_EQ(cluster_.node(cluster_.OwnerOf(slot))->Execute({"GET", keys.DataSetKey("orders/7")}),
            Reply::String("0"));  // the per-slot marker was read

  const std::string old_master = cluster_.OwnerOf(slot);
  cluster_.Failover(old_master, "promoted:7100");
  // The old address is gone: the command fails (it may have run), the map
  // is refreshed, and the next command reaches the promoted node, which
  // answers NOSCRIPT first.
  EXPECT_THAT(acquire(b, "orders/7").status(), StatusIs(absl::StatusCode::kUnavailable));
  loop_.RunUntilIdle();
  EXPECT_EQ(t2->OwnerOf(slot), "promoted:7100");
  // t1 held a connection to the gone master: its next command there fails,
  // the refresh drops that connection (one per live master is left).
  EXPECT_EQ(t1->node_connections(), 3u);
  EXPECT_THAT(SendNow(*t1, {"GET", keys.LockKey("orders/7")}).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  loop_.RunUntilIdle();
  EXPECT_EQ(t1->OwnerOf(slot), "promoted:7100");
  EXPECT_EQ(t1->node_connections(), 3u);
  EXPECT_EQ(t1->Masters(), (std::vector<std::string>{
                               cluster_.addresses()[0], cluster_.addresses()[1],
                               cluster_.addresses()[2]}));
  EXPECT_THAT(acquire(b, "orders/7").status(), StatusIs(absl::StatusCode::kAborted));
  // The promoted node's cache is empty, and the connections to it are new:
  // each loads a script right before its first EVALSHA on it (issue 22),
  // so no NOSCRIPT and no EVAL sent a round trip later.
  EXPECT_EQ(Count("promoted:7100", "EVAL"), 0);
  EXPECT_GE(Count("promoted:7100", "EVALSHA"), 1);
  std::set<std::string> loaded;  // per client connection
  for (const FakeRedis::LogEntry& e : cluster_.node("promoted:7100")->log()) {
    if (e.from_script) continue;
    const std::string conn = absl::StrCat(e.session_id, ":");
    if (e.argv[0] == "SCRIPT" && e.argv.size() == 3) loaded.insert(conn + Sha1Hex(e.argv[2]));
    if (e.argv[0] == "EVALSHA") {
      EXPECT_EQ(loaded.count(conn + e.argv[1]), 1u) << "EVALSHA before its SCRIPT LOAD";
    }
  }
  auto next = acquire(b, "orders/8");
  ASSERT_THAT(next.status(), IsOk());
}

TEST_F(FakeClusterTest, SubscriptionMovesWhenItsNodeIsGone) {
  auto t = NewClient();
  const std::string channel = "dlock:{r}:released";
  // A real cluster forwards a PUBLISH to every node; the fake does not.
  auto publish_everywhere = [&](const std::string& message) {
    for (const std::string& a : cluster_.addresses()) {
      cluster_.node(a)->Execute({"PUBLISH", channel, message});
    }
  };
  // The node whose PUBLISH reaches a subscriber (probes are not recorded).
  auto subscribed_at = [&]() {
    std::string where;
    for (const std::string& a : cluster_.addresses()) {
      if (cluster_.node(a)->Execute({"PUBLISH", channel, "probe"}).integer > 0) where = a;
    }
    loop_.RunUntilIdle();
    return where;
  };
  std::vector<std::string> got;
  int ready = 0;
  auto sub = t->Subscribe(
      channel,
      [&](absl::string_view, absl::string_view m) {
        if (m != "probe") got.emplace_back(m);
      },
      [&](absl::Status s) {
        EXPECT_THAT(s, IsOk());
        ++ready;
      });
  ASSERT_THAT(sub.status(), IsOk());
  ASSERT_THAT(SendNow(*t, {"PING"}).status(), IsOk());  // the map is loaded
  loop_.RunUntilIdle();
  EXPECT_EQ(ready, 1);
  const std::string first = subscribed_at();
  ASSERT_FALSE(first.empty());
  publish_everywhere("one");
  loop_.RunUntilIdle();
  EXPECT_EQ(got, std::vector<std::string>({"one"}));

  cluster_.Failover(first, "promoted:7100");
  // A command to the gone node fails and refreshes the map; the
  // subscription moves to a master the new map names.
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    if (t->OwnerOf(slot) == first) {
      EXPECT_THAT(SendNow(*t, {"GET", SlotTag(slot)}).status(),
                  StatusIs(absl::StatusCode::kUnavailable));
      break;
    }
  }
  loop_.RunUntilIdle();
  const std::string second = subscribed_at();
  EXPECT_NE(second, "");
  EXPECT_NE(second, first);
  publish_everywhere("two");
  loop_.RunUntilIdle();
  EXPECT_EQ(got, std::vector<std::string>({"one", "two"}));
  EXPECT_EQ(ready, 1);  // on_ready ran once
  sub->reset();
  publish_everywhere("three");
  loop_.RunUntilIdle();
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(subscribed_at(), "");
}

TEST_F(FakeClusterTest, CommandsBeforeTheMapWaitAndCloseCancelsEverything) {
  ClusterTransportOptions o;
  o.seeds = {{"nowhere", 1}, {"node1", 7001}};
  auto t = NewClient(o);
  int cancelled = 0;
  for (int i = 0; i < 5; ++i) {
    ASSERT_THAT(t->Send({"GET", absl::StrCat("k", i)}, absl::Seconds(1),
                        [&](absl::StatusOr<Reply> r) {
                          EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kCancelled));
                          ++cancelled;
                        }),
                IsOk());
  }
  EXPECT_EQ(t->pending_commands(), 5u);
  t->Close();
  EXPECT_EQ(cancelled, 5);
  loop_.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(cancelled, 5);
  EXPECT_EQ(loop_.pending(), 0u);
}

TEST_F(FakeClusterTest, CloseCancelsAConnectConfirmationStillQueued) {
  // The map is loaded, so Connect's OK is queued for a later turn; Close()
  // must fail it with kCancelled at once (Transport::Close: no callback runs
  // after it returns), not let the queued OK run afterwards.
  auto t = NewClient();
  ASSERT_THAT(SendNow(*t, {"SET", "k", "v"}).status(), IsOk());
  std::vector<absl::Status> got;
  ASSERT_THAT(t->Connect([&](absl::Status s) { got.push_back(s); }), IsOk());
  EXPECT_TRUE(got.empty());
  t->Close();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0], StatusIs(absl::StatusCode::kCancelled));
  loop_.RunUntilIdle();
  EXPECT_EQ(got.size(), 1u);
}

TEST_F(FakeClusterTest, NoReachableSeedFailsWaitingCommands) {
  ClusterTransportOptions o;
  o.seeds = {{"nowhere", 1}};
  auto t = NewClient(o);
  auto r = SendNow(*t, {"GET", "k"});
  EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kUnavailable));
  bool connected = false;
  ASSERT_THAT(t->Connect([&](absl::Status s) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
    connected = true;
  }), IsOk());
  EXPECT_FALSE(connected);
  loop_.RunUntilIdle();
  EXPECT_TRUE(connected);
}

}  // namespace
}  // namespace dlock
