// Randomised invariants in virtual time (a cheap torture run on the fake):
//   - read-write lock: many clients take read or write locks at random,
//     hold them a random while, sometimes crash (never release), while
//     replies and requests are dropped at random. Never is a writer's lease
//     live (before its local deadline, not released) beside any other live
//     lease of the resource; readers do overlap; writers do get in.
//   - multi-lock: clients take random subsets of five resources through
//     RetryLock(SimpleLock) under dropped replies and requests; whenever a
//     multi-lock's callback reports a failure, none of the sub-leases it was
//     granted still holds its key (never a strict subset left behind), and
//     live multi-lock holders never share a resource.
// Local deadlines are never later than the server-side expiry, so "live"
// here means "really held on the server". The counts vary a little from
// run to run (RetryLock's jitter has its own seed); the invariants do not.
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace {

struct Held {
  int client;
  bool write;
  absl::Time deadline;
};

class RwTorture {
 public:
  RwTorture(uint64_t seed, int clients) : rng_(std::seed_seq{seed}), server_(&loop_) {
    server_.Execute(TrustDataSetCommand(KeyScheme()));
    for (int i = 0; i < clients; ++i) {
      auto c = std::make_unique<Client>();
      c->conn = std::make_unique<FakeTransport>(&loop_, &server_);
      c->conn->SetLatency(absl::Milliseconds(1));
      c->rw = std::make_unique<ReadWriteLock>(&loop_, c->conn.get());
      c->readers = std::make_unique<RetryLock>(&loop_, &c->rw->reader());
      c->writers = std::make_unique<RetryLock>(&loop_, &c->rw->writer());
      clients_.push_back(std::move(c));
    }
  }

  void Run(absl::Duration total) {
    for (size_t i = 0; i < clients_.size(); ++i) Next(static_cast<int>(i));
    const absl::Time end = loop_.Now() + total;
    while (loop_.Now() < end) {
      if (absl::Uniform(rng_, 0, 40) == 0) {
        FakeTransport& t = *clients_[absl::Uniform<size_t>(rng_, 0, clients_.size())]->conn;
        if (absl::Bernoulli(rng_, 0.5)) {
          t.DropNextReplies(1);
        } else {
          t.DropNextRequests(1);
        }
      }
      loop_.AdvanceTime(absl::Milliseconds(5));
    }
    stopping_ = true;
    for (auto& c : clients_) {
      c->readers.reset();
      c->writers.reset();
    }
    loop_.AdvanceTime(absl::Seconds(10));
  }

  int violations = 0;
  int reads = 0;
  int writes = 0;
  int max_readers = 0;
  int crashes = 0;

 private:
  struct Client {
    std::unique_ptr<FakeTransport> conn;
    std::unique_ptr<ReadWriteLock> rw;
    std::unique_ptr<RetryLock> readers;
    std::unique_ptr<RetryLock> writers;
  };

  void Next(int i) {
    if (stopping_) return;
    loop_.RunAfter(absl::Milliseconds(absl::Uniform(rng_, 0, 50)), [this, i] { Attempt(i); });
  }

  void Attempt(int i) {
    if (stopping_) return;
    Client& c = *clients_[i];
    const bool write = absl::Bernoulli(rng_, 0.3);
    AcquireOptions o;
    o.ttl = absl::Milliseconds(absl::Uniform(rng_, 100, 400));
    o.wait = absl::Milliseconds(absl::Uniform(rng_, 0, 1000));
    Lock& lock = write ? static_cast<Lock&>(*c.writers) : static_cast<Lock&>(*c.readers);
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire("r", o, [this, i, write, &lock](absl::StatusOr<Lease> lease) {
          if (!lease.ok()) return Next(i);
          OnHeld(i, write, *lease, lock);
        });
    if (!h.ok()) ADD_FAILURE() << h.status();
  }

  void OnHeld(int i, bool write, Lease lease, Lock& lock) {
    const absl::Time now = loop_.Now();
    // Drop holders that released or whose deadline passed.
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->second.deadline <= now) {
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    int others = 0;
    bool writer_present = false;
    for (const auto& [token, h] : held_) {
      ++others;
      writer_present |= h.write;
    }
    if ((write && others > 0) || writer_present) ++violations;
    (write ? writes : reads)++;
    held_[lease.token] = Held{i, write, lease.deadline};
    if (!write) {
      int readers = 0;
      for (const auto& [token, h] : held_) readers += h.write ? 0 : 1;
      max_readers = std::max(max_readers, readers);
    }
    // Hold a while (within the lease), then release -- or crash.
    const absl::Duration hold = (lease.deadline - now) * absl::Uniform(rng_, 0.0, 0.9);
    const bool crash = absl::Bernoulli(rng_, 0.05);
    loop_.RunAfter(hold, [this, i, lease, crash, &lock] {
      if (stopping_) return;  // the RetryLocks are gone
      if (crash) {
        ++crashes;  // its lease stays live until its deadline
        return Next(i);
      }
      held_.erase(lease.token);
      (void)lock.Release(lease, [](absl::Status) {});
      Next(i);
    });
  }

  absl::BitGen rng_;
  ManualEventLoop loop_;
  FakeRedis server_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, Held> held_;
  bool stopping_ = false;
};

TEST(ReadWriteMultiTortureTest, NeverAReaderBesideAWriter) {
  for (uint64_t seed : {1, 2, 3}) {
    RwTorture t(seed, 6);
    t.Run(absl::Seconds(60));
    std::printf("seed %d: %d reads, %d writes, up to %d readers at once, %d crashed holders, "
                "%d violations\n",
                static_cast<int>(seed), t.reads, t.writes, t.max_readers, t.crashes,
                t.violations);
    EXPECT_EQ(t.violations, 0) << "seed " << seed;
    EXPECT_GT(t.reads, 100) << "seed " << seed;
    EXPECT_GT(t.writes, 20) << "seed " << seed;
    EXPECT_GE(t.max_readers, 2) << "seed " << seed;
    EXPECT_GT(t.crashes, 0) << "seed " << seed;
  }
}

// Records every lease the inner lock grants.
class RecordingLock : public Lock {
 public:
  explicit RecordingLock(Lock* inner) : inner_(inner) {}
  std::vector<Lease> granted;

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override {
    return inner_->Acquire(resource, options,
                           [this, cb = std::move(callback)](absl::StatusOr<Lease> l) mutable {
                             if (l.ok()) granted.push_back(*l);
                             std::move(cb)(std::move(l));
                           });
  }
  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    return inner_->Release(lease, std::move(callback));
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl, LeaseCallback callback) override {
    return inner_->Extend(lease, ttl, std::move(callback));
  }

 private:
  Lock* inner_;
};

TEST(ReadWriteMultiTortureTest, AMultiLockNeverLeavesAStrictSubsetAfterAFailure) {
  absl::BitGen rng(std::seed_seq{7});
  ManualEventLoop loop;
  FakeRedis server(&loop);
  server.Execute(TrustDataSetCommand(KeyScheme()));
  KeyScheme keys;
  struct Client {
    std::unique_ptr<FakeTransport> conn;
    std::unique_ptr<SimpleLock> simple;
    std::unique_ptr<RetryLock> retry;
    std::unique_ptr<RecordingLock> recording;
    std::unique_ptr<MultiLock> multi;
  };
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) {
    auto c = std::make_unique<Client>();
    c->conn = std::make_unique<FakeTransport>(&loop, &server);
    c->conn->SetLatency(absl::Milliseconds(1));
    c->simple = std::make_unique<SimpleLock>(&loop, c->conn.get());
    c->retry = std::make_unique<RetryLock>(&loop, c->simple.get());
    c->recording = std::make_unique<RecordingLock>(c->retry.get());
    c->multi = std::make_unique<MultiLock>(&loop, c->recording.get());
    clients.push_back(std::move(c));
  }
  int successes = 0, failures = 0, subsets_left = 0, shared_resource = 0;
  std::map<std::string, std::pair<int, absl::Time>> owner;  // resource -> client, deadline
  bool stopping = false;
  std::function<void(int)> next = [&](int i) {
    loop.RunAfter(absl::Milliseconds(absl::Uniform(rng, 0, 30)), [&, i] {
      if (stopping) return;
      Client& c = *clients[i];
      std::vector<std::string> set;
      for (int r = 0; r < 5; ++r) {
        if (absl::Bernoulli(rng, 0.4)) set.push_back(absl::StrCat("r", r));
      }
      if (set.empty()) set.push_back("r0");
      AcquireOptions o;
      o.ttl = absl::Milliseconds(300);
      o.wait = absl::Milliseconds(absl::Uniform(rng, 0, 300));
      c.recording->granted.clear();
      absl::StatusOr<AcquireHandle> h = c.multi->Acquire(
          set, o, [&, i](absl::StatusOr<std::vector<Lease>> leases) {
            Client& me = *clients[i];
            if (!leases.ok()) {
              ++failures;
              for (const Lease& l : me.recording->granted) {
                Reply v = server.Execute({"GET", keys.LockKey(l.resource)});
                if (v.is_string() && v.str == l.token) ++subsets_left;
              }
              return next(i);
            }
            ++successes;
            const absl::Time now = loop.Now();
            for (const Lease& l : *leases) {
              auto it = owner.find(l.resource);
              if (it != owner.end() && it->second.first != i && it->second.second > now) {
                ++shared_resource;
              }
              owner[l.resource] = {i, l.deadline};
            }
            std::vector<Lease> mine = *leases;
            loop.RunAfter(absl::Milliseconds(absl::Uniform(rng, 0, 150)), [&, i, mine] {
              if (stopping) return;
              for (const Lease& l : mine) owner.erase(l.resource);
              (void)clients[i]->multi->Release(mine, [](absl::Status) {});
              next(i);
            });
          });
      if (!h.ok()) ADD_FAILURE() << h.status();
    });
  };
  for (int i = 0; i < 4; ++i) next(i);
  for (int step = 0; step < 12000; ++step) {  // 60 s virtual
    if (absl::Uniform(rng, 0, 30) == 0) {
      FakeTransport& t = *clients[absl::Uniform<size_t>(rng, 0, clients.size())]->conn;
      if (absl::Bernoulli(rng, 0.5)) {
        t.DropNextReplies(1);
      } else {
        t.DropNextRequests(1);
      }
    }
    loop.AdvanceTime(absl::Milliseconds(5));
  }
  std::printf("multi-lock: %d acquired, %d failed, %d strict subsets left, %d shared\n",
              successes, failures, subsets_left, shared_resource);
  EXPECT_EQ(subsets_left, 0);
  EXPECT_EQ(shared_resource, 0);
  EXPECT_GT(successes, 100);
  EXPECT_GT(failures, 20);
  // Stop: no new work; the objects go.
  stopping = true;
  for (auto& c : clients) {
    c->multi.reset();
    c->retry.reset();
  }
  loop.AdvanceTime(absl::Seconds(10));
  for (auto& c : clients) c->simple.reset();
}

}  // namespace
}  // namespace dlock
