// BlockingClient over caller-made transports: FakeTransports on a FakeRedis
// running on a real loop thread (UvLoopThread, real clock), so the client's
// threads, posts and waits are the real ones and only the server is fake.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/fake_server_test_base.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/observer.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

class BlockingClientFakeTest : public test_support::FakeServerTest<UvLoopThread> {
 protected:
  void HammerWhileDestroying(BlockingClientOptions options);
};

TEST_F(BlockingClientFakeTest, LocksExcludesAndReleasesOverTheFake) {
  auto a = MustCreate();
  auto b = MustCreate();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->server_count(), 1u);
  absl::StatusOr<LockGuard> held = a->TryLock("orders/1", absl::Seconds(10));
  ASSERT_THAT(held.status(), IsOk());
  EXPECT_TRUE(KeyExists("dlock:{orders/1}"));
  EXPECT_THAT(b->TryLock("orders/1", absl::Seconds(10)).status(),
              StatusIs(absl::StatusCode::kAborted));
  // B waits; A's release wakes it.
  std::thread releaser([&] { EXPECT_THAT(held->Unlock(), IsOk()); });
  absl::StatusOr<LockGuard> next = b->Lock("orders/1", absl::Seconds(10), absl::Seconds(30));
  releaser.join();
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_GT(next->lease().fence, 0);
  EXPECT_THAT(next->Unlock(), IsOk());
  EXPECT_FALSE(KeyExists("dlock:{orders/1}"));
}

TEST_F(BlockingClientFakeTest, AutoRenewedGuardOutlivesItsTtl) {
  auto client = MustCreate();
  auto rival = MustCreate();
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  absl::StatusOr<LockGuard> guard = client->TryLock("jobs/long", absl::Milliseconds(300));
  ASSERT_THAT(guard.status(), IsOk());
  // Three ttls later the lease is still held (renewed), not taken.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  EXPECT_TRUE(guard->IsValid());
  EXPECT_THAT(rival->TryLock("jobs/long", absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(guard->Unlock(), IsOk());
}

TEST_F(BlockingClientFakeTest, UnreachableServerIsUnavailable) {
  BlockingClientOptions options;
  options.connect_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<BlockingClient>> c =
      BlockingClient::Create(&thread_, Connections(1, /*partitioned=*/1), options);
  EXPECT_THAT(c.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_NE(c.status().message().find("server 0"), absl::string_view::npos)
      << c.status();
}

// A transport that only forwards commands (no lifecycle overrides): the
// client relies on Transport's defaults (Connect = PING probe).
class Forwarding : public Transport {
 public:
  explicit Forwarding(std::unique_ptr<FakeTransport> inner) : inner_(std::move(inner)) {}
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override {
    return inner_->Send(std::move(argv), timeout, std::move(callback));
  }
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override {
    return inner_->Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
  }

 private:
  std::unique_ptr<FakeTransport> inner_;
};

TEST_F(BlockingClientFakeTest, ATransportWithTheDefaultLifecycleWorks) {
  for (bool partitioned : {false, true}) {
    BlockingClient::TransportFactory make =
        [this, partitioned](EventLoop* loop)
        -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
      auto inner = std::make_unique<FakeTransport>(loop, server_.get());
      if (partitioned) inner->Partition();
      std::vector<std::unique_ptr<Transport>> ts;
      ts.push_back(std::make_unique<Forwarding>(std::move(inner)));
      return ts;
    };
    absl::StatusOr<std::unique_ptr<BlockingClient>> c =
        BlockingClient::Create(&thread_, std::move(make), {});
    if (partitioned) {
      // The PING probe failed.
      EXPECT_THAT(c.status(), StatusIs(absl::StatusCode::kUnavailable));
      continue;
    }
    ASSERT_THAT(c.status(), IsOk());
    absl::StatusOr<LockGuard> g = (*c)->TryLock("forwarded", absl::Seconds(5));
    ASSERT_THAT(g.status(), IsOk());
    EXPECT_THAT(g->Unlock(), IsOk());
  }
}

TEST_F(BlockingClientFakeTest, BadInputIsInvalidArgument) {
  EXPECT_THAT(BlockingClient::Create(nullptr, Connections(), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BlockingClient::Create(&thread_, nullptr, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BlockingClient::Create(&thread_, Connections(0), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BlockingClientOptions reentrant;
  reentrant.reentrant = true;
  EXPECT_THAT(BlockingClient::Create(&thread_, Connections(3), reentrant).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BlockingClient::TransportFactory failing =
      [](EventLoop*) -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    return absl::InvalidArgumentError("no such server");
  };
  EXPECT_THAT(BlockingClient::Create(&thread_, std::move(failing), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Rejected by the policy from the call itself (no callback): its status.
  auto client = MustCreate();
  ASSERT_NE(client, nullptr);
  EXPECT_THAT(client->TryLock("", absl::Seconds(1)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client->TryLock("r", absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // On the loop thread it would wait for itself.
  absl::Status on_loop;
  ASSERT_THAT(OnLoop([&] {
                on_loop = BlockingClient::Create(&thread_, Connections(), {}).status();
              }),
              IsOk());
  EXPECT_THAT(on_loop, StatusIs(absl::StatusCode::kFailedPrecondition));
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

// Issue 11's guarantee on the fake: the client is destroyed while threads
// are inside Lock, waiting for resources a rival holds, after hammering one
// resource with Lock/Unlock. Each of those calls began before the destructor
// (the observer saw each thread's resource waited for), so each returns
// kCancelled; no lock of the destroyed client is left behind; the rival
// keeps its own.
void BlockingClientFakeTest::HammerWhileDestroying(BlockingClientOptions options) {
  WaitRecorder waits;
  options.observer = &waits;
  std::unique_ptr<BlockingClient> client = MustCreate(std::move(options));
  std::unique_ptr<BlockingClient> rival = MustCreate();
  ASSERT_NE(client, nullptr);
  ASSERT_NE(rival, nullptr);
  BlockingClient* const raw = client.get();
  constexpr int kThreads = 8;
  std::vector<LockGuard> rival_guards;
  std::vector<std::string> held;
  for (int t = 0; t < kThreads; ++t) {
    held.push_back(absl::StrCat("hammer/held/", t));
    absl::StatusOr<LockGuard> g = rival->TryLock(held.back(), absl::Seconds(60));
    ASSERT_THAT(g.status(), IsOk());
    rival_guards.push_back(*std::move(g));
  }
  std::atomic<int> locked{0};
  std::vector<absl::Status> last(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        absl::StatusOr<LockGuard> g =
            raw->Lock("hammer/a", absl::Seconds(10), absl::Seconds(30));
        EXPECT_THAT(g.status(), IsOk());
        if (g.ok()) {
          EXPECT_THAT(g->Unlock(), IsOk());
          ++locked;
        }
      }
      // The last call: waits until the client is destroyed.
      last[t] = raw->Lock(held[t], absl::Seconds(10), absl::Seconds(600)).status();
    });
  }
  ASSERT_TRUE(waits.WaitForAll(held, std::chrono::seconds(60)))
      << "not every thread is waiting inside Lock";
  client.reset();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(locked.load(), kThreads * 10);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_THAT(last[t], StatusIs(absl::StatusCode::kCancelled)) << "thread " << t;
  }
  EXPECT_FALSE(KeyExists("dlock:{hammer/a}"));
  for (LockGuard& g : rival_guards) {
    EXPECT_TRUE(g.IsValid());
    EXPECT_THAT(g.Unlock(), IsOk());
  }
}

TEST_F(BlockingClientFakeTest, DestroyedWhileThreadsLockAndUnlockWithRenewal) {
  HammerWhileDestroying({});
}

TEST_F(BlockingClientFakeTest, DestroyedWhileThreadsLockAndUnlockWithoutRenewal) {
  BlockingClientOptions options;
  options.auto_renew = false;
  HammerWhileDestroying(std::move(options));
}

// BlockingClient::Semaphore: at most N permit guards across clients, a
// waiter woken when a guard goes, bad input refused, and permits still held
// released by the client's destructor.
TEST_F(BlockingClientFakeTest, SemaphoreHandsOutAtMostNPermitGuardsAcrossClients) {
  auto a = MustCreate();
  auto b = MustCreate();
  auto c = MustCreate();
  absl::StatusOr<LockGuard> first = a->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration());
  absl::StatusOr<LockGuard> second = b->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration());
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_NE(first->lease().token, second->lease().token);
  EXPECT_LT(first->lease().fence, second->lease().fence);
  EXPECT_THAT(c->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(c->Semaphore("pool", 2, absl::Seconds(10), absl::Milliseconds(100)).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // A waiter blocks until a guard goes.
  absl::StatusOr<LockGuard> third = absl::UnknownError("not run");
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    third = c->Semaphore("pool", 2, absl::Seconds(10), absl::Seconds(60));
    returned = true;
  });
  EXPECT_FALSE(returned.load());
  EXPECT_THAT(first->Unlock(), IsOk());
  waiter.join();
  ASSERT_THAT(third, IsOk());
  EXPECT_TRUE(third->IsValid());
  // Bad input, from the call.
  EXPECT_THAT(a->Semaphore("pool", 0, absl::Seconds(10), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a->Semaphore("", 2, absl::Seconds(10), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(a->Semaphore("pool", 2, absl::Milliseconds(1), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Destroying a client gives back the permits its guards hold.
  b.reset();
  EXPECT_FALSE(second->IsValid());
  absl::StatusOr<LockGuard> fourth = a->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration());
  EXPECT_THAT(fourth, IsOk());
  third = LockGuard();
  fourth = LockGuard();
  EXPECT_FALSE(KeyExists("dlock:{pool}"));
}

TEST_F(BlockingClientFakeTest, SemaphoreNeedsASingleServer) {
  absl::StatusOr<std::unique_ptr<BlockingClient>> redlock =
      BlockingClient::Create(&thread_, Connections(3), {});
  ASSERT_THAT(redlock.status(), IsOk());
  EXPECT_THAT((*redlock)->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A factory that hands over a null transport beside a real one: rejected,
// and the client that failed to start closes the real one and never touches
// the null one (it used to be dereferenced while draining).
TEST_F(BlockingClientFakeTest, NullTransportIsInvalidArgumentAndTheOthersAreClosed) {
  FakeTransport* real = nullptr;
  BlockingClient::TransportFactory with_null =
      [&](EventLoop* loop) -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    std::vector<std::unique_ptr<Transport>> ts;
    ts.push_back(std::make_unique<FakeTransport>(loop, server_.get()));
    real = static_cast<FakeTransport*>(ts.back().get());
    ts.push_back(nullptr);
    return ts;
  };
  EXPECT_THAT(BlockingClient::Create(&thread_, std::move(with_null), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(real, nullptr);
}

TEST_F(BlockingClientFakeTest, OptionsThatNeedOneServerAreRefusedWhenCreateMakesSeveral) {
  // Connect checks these against its URLs; Create learns the count only
  // from the factory, and must refuse rather than silently ignore them.
  auto two_servers = [&](EventLoop* loop)
      -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    std::vector<std::unique_ptr<Transport>> ts;
    ts.push_back(std::make_unique<FakeTransport>(loop, server_.get()));
    ts.push_back(std::make_unique<FakeTransport>(loop, server_.get()));
    return ts;
  };
  BlockingClientOptions acked;
  acked.min_replicas = 1;
  auto a = BlockingClient::Create(&thread_, two_servers, acked);
  EXPECT_THAT(a.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  if (!a.ok()) EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("min_replicas"));
  BlockingClientOptions fair;
  fair.fair = true;
  EXPECT_THAT(BlockingClient::Create(&thread_, two_servers, fair).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BlockingClientOptions reentrant;
  reentrant.reentrant = true;
  EXPECT_THAT(BlockingClient::Create(&thread_, two_servers, reentrant).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(BlockingClientFakeTest, ReplicaAcknowledgementIsRefusedWhereItIsNotImplemented) {
  // The fair queue and the semaphore do not wait for replicas: asking for
  // min_replicas there is an error, never a grant believed replicated.
  auto one_server = [&](EventLoop* loop)
      -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    std::vector<std::unique_ptr<Transport>> ts;
    ts.push_back(std::make_unique<FakeTransport>(loop, server_.get()));
    return ts;
  };
  BlockingClientOptions fair;
  fair.fair = true;
  fair.min_replicas = 1;
  EXPECT_THAT(BlockingClient::Create(&thread_, one_server, fair).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BlockingClientOptions acked;
  acked.min_replicas = 1;
  auto client = BlockingClient::Create(&thread_, one_server, acked);
  ASSERT_THAT(client.status(), IsOk());
  EXPECT_THAT((*client)->Semaphore("pool", 2, absl::Seconds(10), absl::ZeroDuration()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(server_->Execute({"EXISTS", "dlock:{pool}:lock"}).integer, 0);
}

}  // namespace
}  // namespace dlock
