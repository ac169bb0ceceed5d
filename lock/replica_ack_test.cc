// Replica acknowledgement (replica_ack.h) through SimpleLock and
// ReentrantLock on FakeRedis in virtual time: WAIT goes right behind the
// script, a shortfall releases what was granted and reports kUnavailable,
// and a cold script cache (loaded on the connection first) needs one WAIT only.
#include "dlock/lock/replica_ack.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;

class ReplicaAckTest : public ::testing::Test {
 protected:
  ReplicaAckTest() : server_(&loop_), conn_(&loop_, &server_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    server_.Execute(TrustDataSetCommand(KeyScheme{}));
    server_.ClearLog();
  }

  static SimpleLockOptions Acked(int n) {
    SimpleLockOptions o;
    o.replica_ack = ReplicaAck(n, absl::Milliseconds(50));
    return o;
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, absl::string_view resource,
                                   std::string task = "") {
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    o.task_id = std::move(task);
    EXPECT_THAT(lock.Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = r; }),
                IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  absl::StatusOr<Lease> ExtendNow(Lock& lock, const Lease& lease) {
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    EXPECT_THAT(lock.Extend(lease, absl::Seconds(20),
                            [&](absl::StatusOr<Lease> r) { out = r; }),
                IsOk());
    loop_.RunUntilIdle();
    return out;
  }

  // The client's commands as the server ran them (not the scripts' calls,
  // nor the SCRIPT LOAD a connection sends before a script's first run on
  // it: transport.h).
  std::vector<std::string> CommandNames() const {
    std::vector<std::string> names;
    for (const FakeRedis::LogEntry& e : server_.log()) {
      if (!e.from_script && e.session_id != 0 && e.argv[0] != "SCRIPT") {
        names.push_back(e.argv[0]);
      }
    }
    return names;
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  FakeTransport conn_;
  KeyScheme keys_;
};

TEST_F(ReplicaAckTest, GrantCountsWhenEnoughReplicasAcknowledge) {
  server_.SetAcknowledgingReplicas(2);
  SimpleLock lock(&loop_, &conn_, Acked(2));
  absl::StatusOr<Lease> lease = AcquireNow(lock, "r");
  ASSERT_THAT(lease, IsOk());
  EXPECT_THAT(CommandNames(), ElementsAre("EVALSHA", "WAIT"));
  EXPECT_EQ(server_.log().back().argv, (std::vector<std::string>{"WAIT", "2", "50"}));
}

TEST_F(ReplicaAckTest, NoWaitIsSentWhenTheOptionIsOff) {
  SimpleLock lock(&loop_, &conn_);
  ASSERT_THAT(AcquireNow(lock, "r"), IsOk());
  // The acquire's transaction (docs/fences.md), no WAIT.
  EXPECT_THAT(CommandNames(), ElementsAre("MULTI", "SET", "INCR", "GET", "EXEC"));
}

TEST_F(ReplicaAckTest, GrantWithTooFewAcknowledgementsIsReleasedAndUnavailable) {
  server_.SetAcknowledgingReplicas(1);
  SimpleLock lock(&loop_, &conn_, Acked(2));
  absl::StatusOr<Lease> lease = AcquireNow(lock, "r");
  EXPECT_THAT(lease, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(IsReplicaShortfall(lease.status())) << lease.status();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

TEST_F(ReplicaAckTest, ContentionStaysAbortedWhateverTheReplicasSay) {
  SimpleLock plain(&loop_, &conn_);
  ASSERT_THAT(AcquireNow(plain, "r"), IsOk());
  SimpleLock acked(&loop_, &conn_, Acked(2));
  EXPECT_THAT(AcquireNow(acked, "r"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_TRUE(server_.Exists(keys_.LockKey("r")));
}

TEST_F(ReplicaAckTest, ExtendWithTooFewAcknowledgementsReleasesTheLease) {
  server_.SetAcknowledgingReplicas(2);
  SimpleLock lock(&loop_, &conn_, Acked(2));
  absl::StatusOr<Lease> lease = AcquireNow(lock, "r");
  ASSERT_THAT(lease, IsOk());
  server_.SetAcknowledgingReplicas(1);
  absl::StatusOr<Lease> ext = ExtendNow(lock, *lease);
  EXPECT_TRUE(IsReplicaShortfall(ext.status())) << ext.status();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
  server_.SetAcknowledgingReplicas(2);
  EXPECT_THAT(ExtendNow(lock, *lease), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(ReplicaAckTest, ColdScriptCacheStillNeedsOneWaitBehindTheScript) {
  server_.Execute({"SCRIPT", "FLUSH"});
  server_.ClearLog();
  server_.SetAcknowledgingReplicas(1);
  SimpleLock lock(&loop_, &conn_, Acked(1));
  ASSERT_THAT(AcquireNow(lock, "r"), IsOk());
  // The connection loads the script right before its EVALSHA (issue 22),
  // so the WAIT behind it runs after the script's write: one is enough.
  EXPECT_THAT(CommandNames(), ElementsAre("EVALSHA", "WAIT"));
  ASSERT_FALSE(server_.log().empty());
  EXPECT_EQ(server_.log().front().argv[0], "SCRIPT");
}

TEST_F(ReplicaAckTest, ReentrantAcquisitionWithTooFewAcknowledgementsIsUndone) {
  server_.SetAcknowledgingReplicas(2);
  ReentrantLockOptions o;
  o.replica_ack = ReplicaAck(2);
  ReentrantLock lock(&loop_, &conn_, o);
  absl::StatusOr<Lease> first = AcquireNow(lock, "r", "t");
  ASSERT_THAT(first, IsOk());
  server_.SetAcknowledgingReplicas(0);
  absl::StatusOr<Lease> second = AcquireNow(lock, "r", "t");
  EXPECT_TRUE(IsReplicaShortfall(second.status())) << second.status();
  // Only the first hold is left: one release frees the key.
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(lock.Release(*first, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(released, IsOk());
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

TEST_F(ReplicaAckTest, ReentrantExtendWithTooFewAcknowledgementsGivesUpTheHold) {
  server_.SetAcknowledgingReplicas(1);
  ReentrantLockOptions o;
  o.replica_ack = ReplicaAck(1);
  ReentrantLock lock(&loop_, &conn_, o);
  absl::StatusOr<Lease> lease = AcquireNow(lock, "r", "t");
  ASSERT_THAT(lease, IsOk());
  server_.SetAcknowledgingReplicas(0);
  absl::StatusOr<Lease> ext = ExtendNow(lock, *lease);
  EXPECT_TRUE(IsReplicaShortfall(ext.status())) << ext.status();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("r")));
}

TEST_F(ReplicaAckTest, BadOptionsAreRejectedByTheCall) {
  SimpleLockOptions o = Acked(1);
  o.replica_ack.timeout = absl::ZeroDuration();
  SimpleLock lock(&loop_, &conn_, o);
  AcquireOptions a;
  EXPECT_THAT(lock.Acquire("r", a, [](absl::StatusOr<Lease>) { FAIL(); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  SimpleLock negative(&loop_, &conn_, Acked(-1));
  EXPECT_THAT(negative.Acquire("r", a, [](absl::StatusOr<Lease>) { FAIL(); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
}


// The acknowledgement code is linked only through ReplicaAck(): an option
// with min_replicas set by hand has none to run, and every policy that
// takes the option refuses it from the call (nothing is sent) instead of
// granting a lease nobody confirmed was replicated.
TEST_F(ReplicaAckTest, AnAckNotMadeByReplicaAckIsRefusedNotIgnored) {
  server_.SetAcknowledgingReplicas(2);
  ReplicaAckOptions by_hand;
  by_hand.min_replicas = 1;
  EXPECT_THAT(ValidateReplicaAck(by_hand), StatusIs(absl::StatusCode::kInvalidArgument));
  SimpleLockOptions simple;
  simple.replica_ack = by_hand;
  ReentrantLockOptions reentrant;
  reentrant.replica_ack = by_hand;
  ReadWriteLockOptions rw_options;
  rw_options.replica_ack = by_hand;
  SimpleLock simple_lock(&loop_, &conn_, simple);
  ReentrantLock reentrant_lock(&loop_, &conn_, reentrant);
  ReadWriteLock rw(&loop_, &conn_, rw_options);
  AcquireOptions a;
  for (Lock* lock : {static_cast<Lock*>(&simple_lock), static_cast<Lock*>(&reentrant_lock),
                     &rw.reader(), &rw.writer()}) {
    absl::Status s = lock->Acquire("r", a, [](absl::StatusOr<Lease>) { FAIL(); }).status();
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("dlock::ReplicaAck()"));
  }
  loop_.RunUntilIdle();
  EXPECT_TRUE(server_.log().empty());
  // ReplicaAck(0) is off, as the default option is.
  EXPECT_THAT(ValidateReplicaAck(ReplicaAck(0)), IsOk());
  EXPECT_THAT(ValidateReplicaAck(ReplicaAckOptions()), IsOk());
  EXPECT_THAT(ValidateReplicaAck(ReplicaAck(1)), IsOk());
}

// The read-write lock (dlock run's exclusive and --shared locks) goes
// through the same acknowledgement: reader and writer grants and extends.
ReadWriteLockOptions AckedRw(int n) {
  ReadWriteLockOptions o;
  o.replica_ack = ReplicaAck(n, absl::Milliseconds(50));
  return o;
}

TEST_F(ReplicaAckTest, ReadWriteGrantsWaitForTheirAcknowledgements) {
  server_.SetAcknowledgingReplicas(2);
  ReadWriteLock rw(&loop_, &conn_, AckedRw(2));
  ASSERT_THAT(AcquireNow(rw.reader(), "r"), IsOk());
  EXPECT_THAT(CommandNames(), ElementsAre("EVALSHA", "WAIT"));
  ASSERT_THAT(AcquireNow(rw.writer(), "w"), IsOk());
  EXPECT_THAT(CommandNames(), ElementsAre("EVALSHA", "WAIT", "EVALSHA", "WAIT"));
}

TEST_F(ReplicaAckTest, ReadWriteGrantsWithTooFewAcknowledgementsAreReleased) {
  server_.SetAcknowledgingReplicas(1);
  ReadWriteLock rw(&loop_, &conn_, AckedRw(2));
  absl::StatusOr<Lease> w = AcquireNow(rw.writer(), "w");
  EXPECT_TRUE(IsReplicaShortfall(w.status())) << w.status();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("w")));
  absl::StatusOr<Lease> r = AcquireNow(rw.reader(), "r");
  EXPECT_TRUE(IsReplicaShortfall(r.status())) << r.status();
  EXPECT_FALSE(server_.Exists(absl::StrCat(keys_.LockKey("r"), ":readers")));
}

TEST_F(ReplicaAckTest, ReadWriteExtendsWithTooFewAcknowledgementsReleaseTheLease) {
  server_.SetAcknowledgingReplicas(2);
  ReadWriteLock rw(&loop_, &conn_, AckedRw(2));
  absl::StatusOr<Lease> w = AcquireNow(rw.writer(), "w");
  absl::StatusOr<Lease> r = AcquireNow(rw.reader(), "r");
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(r, IsOk());
  server_.SetAcknowledgingReplicas(1);
  absl::StatusOr<Lease> we = ExtendNow(rw.writer(), *w);
  EXPECT_TRUE(IsReplicaShortfall(we.status())) << we.status();
  EXPECT_FALSE(server_.Exists(keys_.LockKey("w")));
  absl::StatusOr<Lease> re = ExtendNow(rw.reader(), *r);
  EXPECT_TRUE(IsReplicaShortfall(re.status())) << re.status();
  EXPECT_FALSE(server_.Exists(absl::StrCat(keys_.LockKey("r"), ":readers")));
}


// A cluster transport cannot route WAIT to the script's master: refused by
// the call, nothing sent.
class ClusterLikeTransport : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  bool cluster() const override { return true; }
};

TEST_F(ReplicaAckTest, RefusedOnAClusterTransport) {
  ClusterLikeTransport cluster_conn(&loop_, &server_);
  SimpleLock lock(&loop_, &cluster_conn, Acked(1));
  AcquireOptions o;
  o.ttl = absl::Seconds(10);
  EXPECT_THAT(lock.Acquire("r", o, [](absl::StatusOr<Lease>) { FAIL() << "called back"; }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.RunUntilIdle();
  EXPECT_THAT(CommandNames(), ElementsAre());
}

}  // namespace
}  // namespace dlock
