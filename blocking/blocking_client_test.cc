#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/connect.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/lock/observer.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::StatusIs;

std::string Url(const RedisServer& server) {
  return absl::StrCat("redis://", server.address());
}

// Counts successful watchdog renewals; lets a test wait for "n renewals".
class RenewalCounter : public LockObserver {
 public:
  void OnRenewal(const RenewalEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.status.ok()) ++ok_;
    cv_.notify_all();
  }
  void OnLeaseLost(const LeaseLostEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++lost_;
    cv_.notify_all();
  }
  // Waits (bounded) until `n` renewals succeeded; false on timeout.
  bool WaitForRenewals(int n, absl::Duration bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(bound),
                        [&] { return ok_ >= n; });
  }
  int lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ok_ = 0;
  int lost_ = 0;
};

// Counts "will try again" events of a waiting Lock.
class WaitCounter : public LockObserver {
 public:
  void OnAcquireWait(const AcquireWaitEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++waits_;
    cv_.notify_all();
  }
  // Waits (bounded) until `n` such events; false on timeout.
  bool WaitForWaits(int n, absl::Duration bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(bound), [&] { return waits_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waits_ = 0;
};

class BlockingClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    ASSERT_THAT(server.status(), IsOk());
    server_ = *std::move(server);
  }

  std::unique_ptr<BlockingClient> MustConnect(ConnectOptions options) {
    absl::StatusOr<std::unique_ptr<BlockingClient>> client =
        ConnectBlockingClient(std::move(options));
    EXPECT_THAT(client.status(), IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }
  ConnectOptions Options() {
    ConnectOptions o;
    o.redis_urls = {Url(*server_)};
    o.connect_timeout = absl::Seconds(5);
    return o;
  }

  std::unique_ptr<RedisServer> server_;
};

TEST_F(BlockingClientTest, LocksAndUnlocksThroughAGuard) {
  auto client = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->server_count(), 1u);
  {
    absl::StatusOr<LockGuard> guard = client->TryLock("orders/42", absl::Seconds(10));
    ASSERT_THAT(guard.status(), IsOk());
    EXPECT_TRUE(guard->IsValid());
    EXPECT_GT(guard->lease().fence, 0);
    absl::StatusOr<Reply> exists = server_->Command({"EXISTS", "dlock:{orders/42}"});
    ASSERT_THAT(exists.status(), IsOk());
    EXPECT_EQ(exists->integer, 1);
  }
  absl::StatusOr<Reply> exists = server_->Command({"EXISTS", "dlock:{orders/42}"});
  ASSERT_THAT(exists.status(), IsOk());
  EXPECT_EQ(exists->integer, 0);
  absl::StatusOr<LockGuard> again = client->TryLock("orders/42", absl::Seconds(10));
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_THAT(again->Unlock(), IsOk());
}

TEST_F(BlockingClientTest, SecondClientTryLockIsAborted) {
  auto first = MustConnect(Options());
  auto second = MustConnect(Options());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<LockGuard> held = first->TryLock("nightly", absl::Seconds(10));
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_THAT(second->TryLock("nightly", absl::Seconds(10)).status(),
              StatusIs(absl::StatusCode::kAborted));
}

TEST_F(BlockingClientTest, KeyPrefixSeparatesClients) {
  ConnectOptions other = Options();
  other.key_prefix = "other:";
  auto first = MustConnect(Options());
  auto second = MustConnect(other);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<LockGuard> a = first->TryLock("nightly", absl::Seconds(10));
  absl::StatusOr<LockGuard> b = second->TryLock("nightly", absl::Seconds(10));
  EXPECT_THAT(a.status(), IsOk());
  EXPECT_THAT(b.status(), IsOk());
}

TEST_F(BlockingClientTest, LockWaitsUntilAnotherThreadDropsTheGuard) {
  WaitCounter waits;
  ConnectOptions waiting = Options();
  waiting.observer = &waits;
  auto first = MustConnect(Options());
  auto second = MustConnect(waiting);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<LockGuard> held = first->TryLock("report", absl::Seconds(10));
  ASSERT_THAT(held.status(), IsOk());
  const int64_t first_fence = held->lease().fence;

  bool saw_wait = false;
  std::thread holder([&] {
    // Drop the guard once the second client found the lock busy and waits.
    saw_wait = waits.WaitForWaits(1, absl::Seconds(30));
    LockGuard dropped = *std::move(held);
  });
  absl::StatusOr<LockGuard> got = second->Lock("report", absl::Seconds(10), absl::Seconds(60));
  holder.join();
  EXPECT_TRUE(saw_wait);
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_GT(got->lease().fence, first_fence);
}

TEST_F(BlockingClientTest, LockGivesUpWithDeadlineExceededWhileHeld) {
  auto first = MustConnect(Options());
  auto second = MustConnect(Options());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  absl::StatusOr<LockGuard> held = first->TryLock("report", absl::Seconds(10));
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_THAT(second->Lock("report", absl::Seconds(10), absl::Milliseconds(200)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(BlockingClientTest, AutoRenewedGuardOutlivesItsTtl) {
  RenewalCounter renewals;
  ConnectOptions options = Options();
  options.observer = &renewals;
  auto client = MustConnect(options);
  auto rival = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  absl::StatusOr<LockGuard> guard = client->TryLock("long-job", absl::Milliseconds(300));
  ASSERT_THAT(guard.status(), IsOk());
  // Renewals come every ttl/3 = 100 ms: ten of them take about a second,
  // more than three TTLs.
  ASSERT_TRUE(renewals.WaitForRenewals(10, absl::Seconds(30)));
  EXPECT_TRUE(guard->IsValid());
  EXPECT_EQ(renewals.lost(), 0);
  EXPECT_THAT(rival->TryLock("long-job", absl::Milliseconds(300)).status(),
              StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<Reply> pttl = server_->Command({"PTTL", "dlock:{long-job}"});
  ASSERT_THAT(pttl.status(), IsOk());
  EXPECT_GT(pttl->integer, 0);
  EXPECT_THAT(guard->Unlock(), IsOk());
}

// Caller-thread I/O (UvLoopThread caller turns): a thread inside a long call
// runs the loop on its own thread; another thread's call must not wait for
// it to end.
TEST_F(BlockingClientTest, ACallIsNotHeldUpByAnotherThreadsWaitingLock) {
  WaitCounter waits;
  ConnectOptions options = Options();
  options.observer = &waits;
  auto client = MustConnect(options);
  auto rival = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  absl::StatusOr<LockGuard> held = rival->TryLock("busy", absl::Seconds(30));
  ASSERT_THAT(held.status(), IsOk());
  absl::StatusOr<LockGuard> waited = absl::UnknownError("not run");
  std::thread waiter([&] {
    // Returns only once the rival lets go, which it does only after the
    // other calls below returned.
    waited = client->Lock("busy", absl::Seconds(10), absl::Seconds(60));
  });
  ASSERT_TRUE(waits.WaitForWaits(1, absl::Seconds(30)));
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<LockGuard> other = client->TryLock("free", absl::Seconds(10));
    ASSERT_THAT(other.status(), IsOk());
    EXPECT_EQ(other->lease().resource, "free");
    EXPECT_THAT(other->Unlock(), IsOk());
  }
  EXPECT_THAT(held->Unlock(), IsOk());
  waiter.join();
  ASSERT_THAT(waited.status(), IsOk());
  EXPECT_EQ(waited->lease().resource, "busy");
}

TEST_F(BlockingClientTest, ThreadsCallingAtOnceEachGetTheirOwnResult) {
  auto client = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  constexpr int kThreads = 6;
  constexpr int kRounds = 150;
  std::mutex mu;
  std::vector<std::string> wrong;
  std::atomic<int> shared_holders{0};
  std::atomic<int> shared_overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string mine = absl::StrCat("own/", t);
      auto note = [&](std::string what) {
        std::lock_guard<std::mutex> l(mu);
        wrong.push_back(absl::StrCat("thread ", t, ": ", what));
      };
      for (int i = 0; i < kRounds; ++i) {
        absl::StatusOr<LockGuard> own = client->TryLock(mine, absl::Seconds(10));
        if (!own.ok()) {
          note(std::string(own.status().message()));
          continue;
        }
        if (own->lease().resource != mine) note("got " + own->lease().resource);
        // One resource all threads contend for: at most one holder.
        absl::StatusOr<LockGuard> shared = client->TryLock("shared", absl::Seconds(10));
        if (shared.ok()) {
          if (shared_holders.fetch_add(1) != 0) shared_overlaps.fetch_add(1);
          if (shared->lease().resource != "shared") note("got " + shared->lease().resource);
          shared_holders.fetch_sub(1);
          absl::Status s = shared->Unlock();
          if (!s.ok()) note(absl::StrCat("shared unlock: ", s.ToString()));
        } else if (shared.status().code() != absl::StatusCode::kAborted) {
          note(shared.status().ToString());
        }
        absl::Status s = own->Unlock();
        if (!s.ok()) note(absl::StrCat("unlock: ", s.ToString()));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(wrong.empty()) << absl::StrJoin(wrong, "\n");
  EXPECT_EQ(shared_overlaps.load(), 0);
}

// Observer callbacks run on whichever thread runs the loop -- with caller
// turns, the calling thread itself. A blocking call made from there must
// fail at once, not wait for the loop it is running.
class CallsBackIntoTheClient : public LockObserver {
 public:
  void OnAcquire(const AcquireEvent& event) override {
    BlockingClient* c = client.load();
    if (c == nullptr || event.resource != "outer") return;
    absl::Status s = c->TryLock("inner", absl::Seconds(10)).status();
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(s);
  }
  std::atomic<BlockingClient*> client{nullptr};
  std::mutex mu;
  std::vector<absl::Status> seen;
};

TEST_F(BlockingClientTest, ABlockingCallFromALoopCallbackFailsInsteadOfDeadlocking) {
  CallsBackIntoTheClient observer;
  ConnectOptions options = Options();
  options.observer = &observer;
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  observer.client = client.get();
  absl::StatusOr<LockGuard> guard = client->TryLock("outer", absl::Seconds(10));
  ASSERT_THAT(guard.status(), IsOk());
  EXPECT_THAT(guard->Unlock(), IsOk());
  observer.client = nullptr;
  std::lock_guard<std::mutex> lock(observer.mu);
  ASSERT_FALSE(observer.seen.empty());
  for (const absl::Status& s : observer.seen) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  }
}

TEST_F(BlockingClientTest, WithoutAutoRenewTheLeaseExpires) {
  ConnectOptions options = Options();
  options.auto_renew = false;
  auto client = MustConnect(options);
  auto rival = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  absl::StatusOr<LockGuard> guard = client->TryLock("short", absl::Milliseconds(200));
  ASSERT_THAT(guard.status(), IsOk());
  // Nothing renews it: the rival gets it once the key expired (it waits on
  // the server's expiry, bounded).
  absl::StatusOr<LockGuard> taken = rival->Lock("short", absl::Seconds(5), absl::Seconds(20));
  ASSERT_THAT(taken.status(), IsOk());
  EXPECT_GT(taken->lease().fence, guard->lease().fence);
  // The old holder's release no longer owns the key.
  EXPECT_THAT(guard->Unlock(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(BlockingClientTest, ReentrantClientNestsOnOneThread) {
  ConnectOptions options = Options();
  options.reentrant = true;
  auto client = MustConnect(options);
  auto rival = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  absl::StatusOr<LockGuard> outer = client->TryLock("tree", absl::Seconds(10));
  ASSERT_THAT(outer.status(), IsOk());
  absl::StatusOr<LockGuard> inner = client->TryLock("tree", absl::Seconds(10));
  ASSERT_THAT(inner.status(), IsOk());
  EXPECT_THAT(inner->Unlock(), IsOk());
  // A non-reentrant client finds a reentrant hold (a hash) under the key:
  // foreign data to it (kInternal), never taken over.
  EXPECT_THAT(rival->TryLock("tree", absl::Seconds(10)).status(),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(outer->Unlock(), IsOk());
  EXPECT_THAT(rival->TryLock("tree", absl::Seconds(10)).status(), IsOk());
}

TEST_F(BlockingClientTest, RefusedConnectionIsUnavailable) {
  ConnectOptions options = Options();
  const std::string address = server_->address();
  ASSERT_THAT(server_->Stop(), IsOk());
  options.connect_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<BlockingClient>> client = ConnectBlockingClient(options);
  EXPECT_THAT(client.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(client.status().message().find(address), std::string::npos)
      << client.status();
}

TEST_F(BlockingClientTest, SilentServerIsUnavailableWithinTheConnectTimeout) {
  // A socket that accepts TCP connections (backlog) but never answers: the
  // AUTH the URL asks for gets no reply.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ConnectOptions options;
  options.redis_urls = {absl::StrCat("redis://:secret@127.0.0.1:", ntohs(addr.sin_port))};
  options.connect_timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<BlockingClient>> client = ConnectBlockingClient(options);
  const absl::Duration took = absl::Now() - start;
  close(fd);
  EXPECT_THAT(client.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(client.status().message().find("secret"), std::string::npos);
  // The contract's bound (no hang), with room for a slow sanitizer build.
  EXPECT_LT(took, absl::Seconds(5));
}

TEST_F(BlockingClientTest, BadInputIsInvalidArgument) {
  ConnectOptions none;
  EXPECT_THAT(ConnectBlockingClient(none).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ConnectOptions bad_url;
  bad_url.redis_urls = {"http://127.0.0.1:6379"};
  EXPECT_THAT(ConnectBlockingClient(bad_url).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ConnectOptions bad_port;
  bad_port.redis_urls = {Url(*server_), "redis://127.0.0.1:99999"};
  absl::Status s = ConnectBlockingClient(bad_port).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(s.message().find("redis_urls[1]"), std::string::npos) << s;
  ConnectOptions secret_url;
  secret_url.redis_urls = {"redis://:hunter2@127.0.0.1:99999"};
  s = ConnectBlockingClient(secret_url).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(s.message().find("hunter2"), std::string::npos) << s;
  ConnectOptions bad_timeout = Options();
  bad_timeout.connect_timeout = absl::ZeroDuration();
  EXPECT_THAT(ConnectBlockingClient(bad_timeout).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ConnectOptions reentrant_redlock = Options();
  reentrant_redlock.redis_urls.push_back(Url(*server_));
  reentrant_redlock.reentrant = true;
  EXPECT_THAT(ConnectBlockingClient(reentrant_redlock).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto client = MustConnect(Options());
  ASSERT_NE(client, nullptr);
  EXPECT_THAT(client->TryLock("", absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client->TryLock("x", absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Records the resources a RetryLock reported waiting for (observer calls
// come from the client's loop thread).
class WaitRecorder : public LockObserver {
 public:
  void OnAcquireWait(const AcquireWaitEvent& e) override {
    std::lock_guard<std::mutex> l(mu_);
    waiting_.insert(std::string(e.resource));
    cv_.notify_all();
  }
  // True once every resource in `rs` has had a waiting Lock.
  bool WaitForAll(const std::vector<std::string>& rs, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, limit, [&] {
      for (const std::string& r : rs) {
        if (waiting_.count(r) == 0) return false;
      }
      return true;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> waiting_;  // guarded by mu_
};

// Destroys the client while 16 threads are inside Lock: first they hammer 2
// resources with Lock and Unlock, then each makes a last Lock on a resource
// of its own that a rival client holds, and the client is destroyed once all
// 16 are seen waiting inside Lock (the observer's wait events name each
// thread's resource). Every one of those calls began before the destructor,
// so each must return kCancelled: no crash, no hang, no lock left behind.
// (A call may only begin before the destructor does: that is why the test
// waits for the 16 to be inside rather than racing them.)
void HammerWhileDestroying(RedisServer& server, ConnectOptions options,
                           ConnectOptions rival_options) {
  WaitRecorder waits;
  options.observer = &waits;
  absl::StatusOr<std::unique_ptr<BlockingClient>> connected =
      ConnectBlockingClient(std::move(options));
  ASSERT_THAT(connected.status(), IsOk());
  std::unique_ptr<BlockingClient> client = *std::move(connected);
  absl::StatusOr<std::unique_ptr<BlockingClient>> rival =
      ConnectBlockingClient(std::move(rival_options));
  ASSERT_THAT(rival.status(), IsOk());
  // The threads' own copy: the main thread resets `client`.
  BlockingClient* const raw = client.get();
  constexpr int kThreads = 16;
  const std::string kKeys[2] = {"hammer/a", "hammer/b"};
  std::vector<std::string> held;
  std::vector<LockGuard> rival_guards;
  for (int t = 0; t < kThreads; ++t) {
    held.push_back(absl::StrCat("hammer/held/", t));
    absl::StatusOr<LockGuard> g = (*rival)->TryLock(held.back(), absl::Seconds(60));
    ASSERT_THAT(g.status(), IsOk());
    rival_guards.push_back(*std::move(g));
  }
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> hammer_done{false};
  int locked = 0;                       // guarded by mu: successful Locks so far
  std::vector<std::string> unexpected;  // guarded by mu
  std::vector<absl::Status> last(kThreads);
  auto note = [&](const absl::Status& s, const char* what, bool lock_call) {
    std::lock_guard<std::mutex> l(mu);
    if (s.ok()) {
      if (lock_call) ++locked;
      cv.notify_all();
    } else if (!(lock_call && absl::IsDeadlineExceeded(s))) {
      unexpected.push_back(absl::StrCat(what, ": ", s.ToString()));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, raw, t] {
      for (int i = 0; !hammer_done.load(); ++i) {
        absl::StatusOr<LockGuard> guard =
            raw->Lock(kKeys[(t + i) % 2], absl::Seconds(10), absl::Seconds(10));
        note(guard.status(), "Lock", true);
        if (guard.ok()) note(guard->Unlock(), "Unlock", false);
      }
      // The last call: waits until the client is destroyed.
      last[t] = raw->Lock(held[t], absl::Seconds(10), absl::Seconds(600)).status();
    });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return locked >= 40; }));
  }
  hammer_done = true;
  ASSERT_TRUE(waits.WaitForAll(held, std::chrono::seconds(60)))
      << "not every thread is waiting inside Lock";
  client.reset();
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(unexpected.empty()) << absl::StrJoin(unexpected, "\n");
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_THAT(last[t], StatusIs(absl::StatusCode::kCancelled)) << "thread " << t;
  }
  // Held leases were released and cancelled attempts gave back what they
  // took: nothing of the destroyed client's is left behind, and the rival
  // still holds its locks.
  for (const std::string& key : kKeys) {
    absl::StatusOr<Reply> exists = server.Command({"EXISTS", absl::StrCat("dlock:{", key, "}")});
    ASSERT_THAT(exists.status(), IsOk());
    EXPECT_EQ(exists->integer, 0) << key;
  }
  for (LockGuard& g : rival_guards) {
    EXPECT_TRUE(g.IsValid());
    EXPECT_THAT(g.Unlock(), IsOk());
  }
}

TEST_F(BlockingClientTest, DestroyedWhileThreadsLockAndUnlockWithRenewal) {
  HammerWhileDestroying(*server_, Options(), Options());
}

TEST_F(BlockingClientTest, DestroyedWhileThreadsLockAndUnlockWithoutRenewal) {
  ConnectOptions options = Options();
  options.auto_renew = false;
  HammerWhileDestroying(*server_, options, Options());
}

TEST_F(BlockingClientTest, ReentrantDestroyedWhileThreadsLockAndUnlock) {
  ConnectOptions options = Options();
  options.reentrant = true;
  HammerWhileDestroying(*server_, options, options);
}

class BlockingClientRedLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
      ASSERT_THAT(server.status(), IsOk());
      servers_.push_back(*std::move(server));
    }
  }
  ConnectOptions Options() {
    ConnectOptions o;
    for (auto& s : servers_) o.redis_urls.push_back(Url(*s));
    o.connect_timeout = absl::Seconds(3);
    return o;
  }
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

TEST_F(BlockingClientRedLockTest, LocksOnAQuorumAndExcludesARival) {
  absl::StatusOr<std::unique_ptr<BlockingClient>> a = ConnectBlockingClient(Options());
  absl::StatusOr<std::unique_ptr<BlockingClient>> b = ConnectBlockingClient(Options());
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ((*a)->server_count(), 3u);
  absl::StatusOr<LockGuard> guard = (*a)->TryLock("invoices", absl::Seconds(10));
  ASSERT_THAT(guard.status(), IsOk());
  int holding = 0;
  for (auto& s : servers_) {
    absl::StatusOr<Reply> r = s->Command({"EXISTS", "dlock:{invoices}"});
    ASSERT_THAT(r.status(), IsOk());
    holding += r->integer;
  }
  EXPECT_GE(holding, 2);
  EXPECT_THAT((*b)->TryLock("invoices", absl::Seconds(10)).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(guard->Unlock(), IsOk());
  absl::StatusOr<LockGuard> next = (*b)->Lock("invoices", absl::Seconds(10), absl::Seconds(10));
  EXPECT_THAT(next.status(), IsOk());
}

TEST_F(BlockingClientRedLockTest, ConnectsWithOneServerDownButNotTwo) {
  ASSERT_THAT(servers_[0]->Stop(), IsOk());
  absl::StatusOr<std::unique_ptr<BlockingClient>> client = ConnectBlockingClient(Options());
  ASSERT_THAT(client.status(), IsOk());
  absl::StatusOr<LockGuard> guard = (*client)->TryLock("invoices", absl::Seconds(10));
  EXPECT_THAT(guard.status(), IsOk());
  guard = LockGuard();
  client->reset();
  ASSERT_THAT(servers_[1]->Stop(), IsOk());
  absl::StatusOr<std::unique_ptr<BlockingClient>> none = ConnectBlockingClient(Options());
  EXPECT_THAT(none.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(none.status().message().find("quorum"), std::string::npos) << none.status();
}

}  // namespace
}  // namespace dlock
