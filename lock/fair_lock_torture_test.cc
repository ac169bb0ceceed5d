// FairLock torture in virtual time: 6 client "processes" loop idle -> wait
// -> hold -> release on one resource while a seeded nemesis kills waiters
// (their connection is cut for good and they never leave the queue; the
// slot comes back later as a fresh process). Checked at every step:
//   - mutual exclusion: at most one holder;
//   - FIFO: a grant never passes over a live waiter that asked earlier;
//   - the bound on dead waiters: while the lock is free and a live waiter
//     waits, it is granted within queue_ttl + queue_ttl / 3 (+ 5 ms) of the
//     later of "the lock became free" and "the last waiter ahead died"
//     (immediately, +5 ms, when no dead waiter is ahead).
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

constexpr absl::Duration kQueueTtl = absl::Milliseconds(300);
constexpr int kSlots = 6;

struct Slot {
  std::unique_ptr<FakeTransport> conn;
  std::unique_ptr<FairLock> lock;
  int generation = 0;
  enum { kIdle, kWaiting, kHolding, kDead } state = kIdle;
  int64_t seq = 0;  // order of its current Acquire call
  absl::Time asked;  // when it was made
  absl::Time dead_at;
  absl::Time next;  // idle until / hold until / revive at
  Lease lease;
};

class FairLockTortureTest : public ::testing::TestWithParam<int> {};

TEST_P(FairLockTortureTest, FifoMutualExclusionAndTheDeadWaiterBound) {
  ManualEventLoop loop;
  FakeRedis server(&loop);
  for (const NamedScript& s : FairScripts()) server.Execute({"SCRIPT", "LOAD", s.script->source()});
  server.Execute(TrustDataSetCommand(KeyScheme()));
  std::mt19937_64 rng(GetParam());
  auto ms = [&](int lo, int hi) {
    return absl::Milliseconds(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  std::vector<Slot> slots(kSlots);
  FairLockOptions options;
  options.queue_ttl = kQueueTtl;
  auto fresh = [&](Slot& s) {
    s.lock.reset();
    s.conn = std::make_unique<FakeTransport>(&loop, &server);
    s.lock = std::make_unique<FairLock>(&loop, s.conn.get(), options);
    s.generation++;
    s.state = Slot::kIdle;
    s.next = loop.Now() + ms(0, 100);
  };
  for (Slot& s : slots) fresh(s);

  int64_t seq = 0, grants = 0, kills = 0, violations = 0;
  absl::Time free_since = loop.Now();
  for (int step = 0; step < 20000 && violations == 0; ++step) {  // 20 s
    const absl::Time now = loop.Now();
    for (int i = 0; i < kSlots; ++i) {
      Slot& s = slots[i];
      if (s.state == Slot::kIdle && now >= s.next) {
        s.state = Slot::kWaiting;
        s.seq = ++seq;
        s.asked = now;
        AcquireOptions o;
        o.ttl = absl::Seconds(2);
        o.wait = absl::Seconds(10);
        const int gen = s.generation;
        ASSERT_TRUE(s.lock->Acquire("r", o, [&, i, gen](absl::StatusOr<Lease> r) {
          Slot& me = slots[i];
          if (me.generation != gen || me.state != Slot::kWaiting) return;
          ASSERT_TRUE(r.ok()) << r.status();
          const absl::Time t = loop.Now();
          int holders = 0;
          // When the last dead waiter ahead of this one stops holding the
          // line: its entry expires at most queue_ttl after its death.
          absl::Time dead_expiry = absl::InfinitePast();
          for (const Slot& o : slots) {
            holders += o.state == Slot::kHolding;
            if (o.state == Slot::kWaiting && o.seq < me.seq) {
              ADD_FAILURE() << "granted over a live earlier waiter at " << t;
              ++violations;
            }
            if (o.state == Slot::kDead && o.seq < me.seq) {
              dead_expiry = std::max(dead_expiry, o.dead_at + kQueueTtl);
            }
          }
          if (holders > 0) {
            ADD_FAILURE() << "two holders at " << t;
            ++violations;
          }
          // Due: at once (a notification) once the lock is free and it
          // asked, or one refresh period after the dead waiters' entries
          // expired.
          const absl::Duration slack = absl::Milliseconds(5);
          const absl::Time bound = std::max(std::max(free_since, me.asked) + slack,
                                            dead_expiry + kQueueTtl / 3 + slack);
          if (t > bound) {
            ADD_FAILURE() << "granted " << (t - std::max(free_since, me.asked))
                          << " after it was due (dead waiters ahead expire by "
                          << (dead_expiry - t) << " from now)";
            ++violations;
          }
          me.state = Slot::kHolding;
          me.lease = *r;
          me.next = t + ms(1, 40);
          ++grants;
        }).ok());
      } else if (s.state == Slot::kHolding && now >= s.next) {
        s.state = Slot::kIdle;
        s.next = now + ms(0, 60);
        free_since = now;
        ASSERT_TRUE(s.lock->Release(s.lease, [](absl::Status st) {
          EXPECT_TRUE(st.ok()) << st;
        }).ok());
      } else if (s.state == Slot::kDead && now >= s.next) {
        fresh(s);
      }
    }
    // The nemesis: now and then a waiter dies without leaving the queue.
    if (std::uniform_int_distribution<int>(0, 400)(rng) == 0) {
      Slot& victim = slots[std::uniform_int_distribution<int>(0, kSlots - 1)(rng)];
      if (victim.state == Slot::kWaiting) {
        victim.conn->Partition();
        victim.state = Slot::kDead;
        victim.dead_at = now;
        victim.next = now + absl::Seconds(1);
        ++kills;
      }
    }
    loop.AdvanceTime(absl::Milliseconds(1));
  }
  EXPECT_EQ(violations, 0);
  EXPECT_GT(grants, 200);
  EXPECT_GT(kills, 3);
  std::printf("seed %d: %lld grants, %lld dead waiters\n", GetParam(),
              static_cast<long long>(grants), static_cast<long long>(kills));
  for (Slot& s : slots) s.lock.reset();
}

INSTANTIATE_TEST_SUITE_P(Seeds, FairLockTortureTest, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace dlock
