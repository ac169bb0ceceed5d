// FairLock on FakeRedis in virtual time: FIFO across clients, no barging,
// one waiter woken per release, a dead waiter skipped after queue_ttl,
// cancel and deadline leave the queue, leases extend and release by token.
#include "dlock/lock/fair_lock.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

using Result = std::shared_ptr<absl::StatusOr<Lease>>;

AcquireOptions Opts(absl::Duration wait, absl::Duration ttl = absl::Seconds(30)) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

bool Pending(const Result& r) { return absl::IsUnknown(r->status()); }

// One process: its own connection and FairLock.
struct Client {
  Client(ManualEventLoop* loop, FakeRedis* server, FairLockOptions o)
      : conn(loop, server), lock(loop, &conn, std::move(o)) {}
  FakeTransport conn;
  FairLock lock;
};

class FairLockTest : public ::testing::Test {
 protected:
  FairLockTest() : server_(&loop_) {
    for (const NamedScript& s : AllScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    for (const NamedScript& s : FairScripts()) {
      server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    }
    server_.Execute(TrustDataSetCommand(KeyScheme()));
  }

  Client& NewClient(absl::Duration queue_ttl = absl::Seconds(3)) {
    FairLockOptions o;
    o.queue_ttl = queue_ttl;
    clients_.push_back(std::make_unique<Client>(&loop_, &server_, o));
    return *clients_.back();
  }

  Result Start(Client& c, absl::string_view resource, AcquireOptions o,
               AcquireHandle* handle = nullptr) {
    auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
    absl::StatusOr<AcquireHandle> h =
        c.lock.Acquire(resource, o, [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
    EXPECT_THAT(h, IsOk());
    if (handle != nullptr && h.ok()) *handle = *h;
    return out;
  }

  Lease Hold(Client& c, absl::string_view resource) {
    Result r = Start(c, resource, Opts(absl::ZeroDuration()));
    loop_.RunUntilIdle();
    EXPECT_THAT(*r, IsOk());
    return r->ok() ? **r : Lease();
  }

  void Release(Client& c, const Lease& lease) {
    absl::Status out = absl::UnknownError("pending");
    EXPECT_THAT(c.lock.Release(lease, [&](absl::Status s) { out = s; }), IsOk());
    loop_.RunUntilIdle();
    EXPECT_THAT(out, IsOk());
  }

  ManualEventLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(FairLockTest, ScriptSha1ConstantsMatchTheirSources) {
  for (const NamedScript& s : FairScripts()) {
    EXPECT_EQ(s.script->sha1(), Sha1Hex(s.script->source()))
        << s.name << ": update its constant in lock/fair_scripts.cc";
    Reply reply = server_.Execute({"SCRIPT", "LOAD", s.script->source()});
    EXPECT_EQ(reply.str, s.script->sha1()) << s.name;
  }
}

TEST_F(FairLockTest, ReplicaAcknowledgementIsRefusedNotIgnored) {
  // FairLockOptions inherits replica_ack from SimpleLockOptions; the fair
  // scripts do not implement it, so asking for it is an error, not a grant
  // the caller believes replicated.
  Client& plain = NewClient();
  Lease lease = Hold(plain, "r");
  FairLockOptions o;
  o.replica_ack.min_replicas = 1;
  Client acked(&loop_, &server_, o);
  bool ran = false;
  auto cb = [&](absl::StatusOr<Lease>) { ran = true; };
  EXPECT_THAT(acked.lock.Acquire("r", Opts(absl::ZeroDuration()), cb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(acked.lock.Acquire("r", Opts(absl::Seconds(5)), cb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(acked.lock.Extend(lease, absl::Seconds(30), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  loop_.RunUntilIdle();
  EXPECT_FALSE(ran);
  EXPECT_EQ(server_.Execute({"EXISTS", "dlock:{r}:queue"}).integer, 0);
}

TEST_F(FairLockTest, TryGrantsAFreeLockAndRefusesAHeldOneWithoutQueueing) {
  Client& a = NewClient();
  Client& b = NewClient();
  Lease lease = Hold(a, "r");
  EXPECT_GE(lease.fence, 1);
  Result r = Start(b, "r", Opts(absl::ZeroDuration()));
  loop_.RunUntilIdle();
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(server_.Execute({"EXISTS", "dlock:{r}:queue"}).integer, 0);
  Release(a, lease);
  Lease again = Hold(b, "r");
  EXPECT_GT(again.fence, lease.fence);
}

TEST_F(FairLockTest, WaitersAreGrantedInArrivalOrder) {
  Client& holder = NewClient();
  std::vector<Client*> waiters = {&NewClient(), &NewClient(), &NewClient(), &NewClient()};
  Lease lease = Hold(holder, "r");
  std::vector<Result> results;
  for (Client* w : waiters) {
    results.push_back(Start(*w, "r", Opts(absl::Seconds(60))));
    loop_.RunUntilIdle();
    loop_.AdvanceTime(absl::Milliseconds(5));
  }
  Client* owner = &holder;
  for (size_t i = 0; i < waiters.size(); ++i) {
    Release(*owner, lease);
    for (size_t j = 0; j < waiters.size(); ++j) {
      EXPECT_EQ(Pending(results[j]), j > i) << "after release " << i << ", waiter " << j;
    }
    ASSERT_THAT(*results[i], IsOk());
    lease = **results[i];
    owner = waiters[i];
  }
  Release(*owner, lease);
  EXPECT_EQ(server_.Execute({"EXISTS", "dlock:{r}:queue"}).integer, 0);
}

TEST_F(FairLockTest, EachReleaseWakesExactlyOneWaiter) {
  Client& holder = NewClient();
  std::vector<Client*> waiters = {&NewClient(), &NewClient(), &NewClient()};
  Lease lease = Hold(holder, "r");
  std::vector<Result> results;
  for (Client* w : waiters) results.push_back(Start(*w, "r", Opts(absl::Seconds(60))));
  loop_.RunUntilIdle();
  std::vector<int64_t> before;
  for (Client* w : waiters) before.push_back(w->lock.attempts());
  Release(holder, lease);  // no time passes: no refresh runs
  EXPECT_EQ(waiters[0]->lock.attempts(), before[0] + 1);
  EXPECT_EQ(waiters[1]->lock.attempts(), before[1]);
  EXPECT_EQ(waiters[2]->lock.attempts(), before[2]);
  EXPECT_THAT(*results[0], IsOk());
  EXPECT_TRUE(Pending(results[1]));
}

TEST_F(FairLockTest, ANewcomerCannotBargeAheadOfTheWokenHead) {
  Client& holder = NewClient();
  Client& head = NewClient();
  Client& newcomer = NewClient();
  Lease lease = Hold(holder, "r");
  Result h = Start(head, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  head.conn.SetLatency(absl::Milliseconds(20));  // the head's wake-up is slow
  absl::Status released = absl::UnknownError("pending");
  ASSERT_THAT(holder.lock.Release(lease, [&](absl::Status s) { released = s; }), IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(released, IsOk());
  // The lock key is free, but it is the head's: a try and a waiting
  // newcomer are both refused / queued.
  Result t = Start(newcomer, "r", Opts(absl::ZeroDuration()));
  Result n = Start(newcomer, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  EXPECT_THAT(*t, StatusIs(absl::StatusCode::kAborted));
  EXPECT_TRUE(Pending(n));
  EXPECT_TRUE(Pending(h));
  loop_.AdvanceTime(absl::Milliseconds(100));  // < the 1 s refresh period
  ASSERT_THAT(*h, IsOk());
  EXPECT_TRUE(Pending(n));
  head.conn.SetLatency(absl::ZeroDuration());
  Release(head, **h);
  EXPECT_THAT(*n, IsOk());
}

TEST_F(FairLockTest, ADeadWaiterHoldsTheLineForAtMostItsQueueTtl) {
  const absl::Duration qttl = absl::Milliseconds(300);
  Client& holder = NewClient(qttl);
  Client& dead = NewClient(qttl);
  Client& live = NewClient(qttl);
  Lease lease = Hold(holder, "r");
  Result d = Start(dead, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  const absl::Time last_refresh = loop_.Now();
  dead.conn.Partition();  // from now on the server never hears from it
  Result l = Start(live, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  Release(holder, lease);  // notifies the dead head: nobody takes it
  loop_.AdvanceTime(last_refresh + qttl - loop_.Now() - absl::Milliseconds(1));
  EXPECT_TRUE(Pending(l)) << "skipped a waiter whose entry had not expired";
  // After the entry expired, the live waiter's next refresh (every
  // queue_ttl / 3) finds itself at the head of a free lock.
  loop_.AdvanceTime(qttl / 3 + absl::Milliseconds(1));
  EXPECT_THAT(*l, IsOk());
  EXPECT_TRUE(Pending(d));
}

TEST_F(FairLockTest, CancelRemovesTheWaiterFromTheQueueAndWakesTheNext) {
  Client& holder = NewClient();
  Client& b = NewClient();
  Client& c = NewClient();
  Lease lease = Hold(holder, "r");
  AcquireHandle hb;
  Result rb = Start(b, "r", Opts(absl::Seconds(60)), &hb);
  loop_.RunUntilIdle();
  Result rc = Start(c, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  EXPECT_TRUE(hb.Cancel());
  EXPECT_EQ(b.lock.waiting(), 0u);
  loop_.RunUntilIdle();
  Release(holder, lease);  // no time passes: C is woken, not refreshed
  EXPECT_THAT(*rc, IsOk());
  EXPECT_TRUE(Pending(rb));  // a cancelled callback never runs
}

TEST_F(FairLockTest, TheDeadlineEndsTheWaitAndLeavesTheQueue) {
  Client& holder = NewClient();
  Client& b = NewClient();
  Client& c = NewClient();
  Lease lease = Hold(holder, "r");
  Result rb = Start(b, "r", Opts(absl::Milliseconds(500)));
  loop_.RunUntilIdle();
  Result rc = Start(c, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  loop_.AdvanceTime(absl::Milliseconds(500));
  EXPECT_THAT(*rb, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(rb->status().message(), ::testing::HasSubstr("position 1 of"));
  Release(holder, lease);
  EXPECT_THAT(*rc, IsOk());
}

TEST_F(FairLockTest, LeasesExtendAndReleaseByToken) {
  Client& a = NewClient();
  Lease lease = Hold(a, "r");
  absl::StatusOr<Lease> ext = absl::UnknownError("pending");
  ASSERT_THAT(a.lock.Extend(lease, absl::Seconds(60),
                            [&](absl::StatusOr<Lease> r) { ext = std::move(r); }),
              IsOk());
  loop_.RunUntilIdle();
  ASSERT_THAT(ext, IsOk());
  EXPECT_EQ(ext->ttl, absl::Seconds(60));
  Lease wrong = lease;
  wrong.token = "not-the-token";
  absl::Status st = absl::UnknownError("pending");
  ASSERT_THAT(a.lock.Release(wrong, [&](absl::Status s) { st = s; }), IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(st, StatusIs(absl::StatusCode::kFailedPrecondition));
  Release(a, lease);
}

TEST_F(FairLockTest, AFairLeaseExcludesASimpleLockOnTheSameResource) {
  Client& a = NewClient();
  FakeTransport conn(&loop_, &server_);
  SimpleLock simple(&loop_, &conn);
  Lease lease = Hold(a, "r");
  absl::StatusOr<Lease> s = absl::UnknownError("pending");
  ASSERT_THAT(simple.Acquire("r", Opts(absl::ZeroDuration()),
                             [&](absl::StatusOr<Lease> r) { s = std::move(r); }),
              IsOk());
  loop_.RunUntilIdle();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted));
  Release(a, lease);
}

TEST_F(FairLockTest, DestroyingTheLockCancelsItsWaitsAndLeavesTheQueue) {
  Client& holder = NewClient();
  Client& c = NewClient();
  Lease lease = Hold(holder, "r");
  FakeTransport conn(&loop_, &server_);  // outlives the lock and its Leave
  auto b = std::make_unique<FairLock>(&loop_, &conn);
  auto rb = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  ASSERT_THAT(b->Acquire("r", Opts(absl::Seconds(60)),
                         [rb](absl::StatusOr<Lease> r) { *rb = std::move(r); }),
              IsOk());
  loop_.RunUntilIdle();
  Result rc = Start(c, "r", Opts(absl::Seconds(60)));
  loop_.RunUntilIdle();
  b.reset();
  loop_.RunUntilIdle();
  Release(holder, lease);  // no time passes: C is next, B's entry is gone
  EXPECT_THAT(*rc, IsOk());
  EXPECT_TRUE(Pending(rb));
}

TEST_F(FairLockTest, BadArgumentsAreRejectedByTheCall) {
  Client& a = NewClient(absl::Milliseconds(10));
  auto cb = [](absl::StatusOr<Lease>) {};
  EXPECT_THAT(a.lock.Acquire("", Opts(absl::ZeroDuration()), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a.lock.Acquire("r", Opts(-absl::Seconds(1)), cb),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a.lock.Acquire("r", Opts(absl::Seconds(1)), cb),  // queue_ttl 10 ms
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace dlock
