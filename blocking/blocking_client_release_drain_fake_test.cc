// A BlockingClient destroyed right after an Unlock finishes the releases
// still in flight (issue 22, cause 3): RedLock's Release reports at quorum,
// and the slow server's release -- its reply not read yet, or its EVALSHA
// answered NOSCRIPT and its EVAL not sent yet -- must still run before the
// connections are closed, bounded by the release timeout. FakeTransports
// on three FakeRedis servers on a real loop thread; only the servers are
// fake.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/scripts.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::testing::IsEmpty;

constexpr int kServers = 3;

class BlockingClientReleaseDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(OnLoop([this] {
                  for (int i = 0; i < kServers; ++i) {
                    servers_.push_back(std::make_unique<FakeRedis>(thread_.loop()));
                    // A trusted data set: RedLock counts its votes at once.
                    servers_.back()->Execute({"SET", "dlock:data-set-began", "0"});
                  }
                }),
                IsOk());
  }
  void TearDown() override {
    EXPECT_THAT(OnLoop([this] { servers_.clear(); }), IsOk());
  }

  template <typename Fn>
  absl::Status OnLoop(Fn fn) {
    return PostAndWait<absl::Status>(&thread_, [&fn](Completion<absl::Status> done) {
      fn();
      done(absl::OkStatus());
    });
  }

  // One connection per server, each with its round-trip latency.
  // Server 2's connection is the slow one: applied after 1 ms, answered
  // after 41 ms (`slow`, if given, receives it).
  std::unique_ptr<BlockingClient> MustCreate(std::vector<absl::Duration> latency,
                                             BlockingClientOptions options = {},
                                             FakeTransport** slow = nullptr) {
    BlockingClient::TransportFactory make =
        [this, latency, slow](EventLoop* loop)
        -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
      std::vector<std::unique_ptr<Transport>> ts;
      for (int i = 0; i < kServers; ++i) {
        auto t = std::make_unique<FakeTransport>(loop, servers_[i].get());
        if (i == kServers - 1) {
          t->SetLatency(absl::Milliseconds(1), latency[i] - absl::Milliseconds(1));
          if (slow != nullptr) *slow = t.get();
        } else {
          t->SetLatency(latency[i]);
        }
        ts.push_back(std::move(t));
      }
      return ts;
    };
    absl::StatusOr<std::unique_ptr<BlockingClient>> c =
        BlockingClient::Create(&thread_, std::move(make), std::move(options));
    EXPECT_THAT(c.status(), IsOk());
    return c.ok() ? *std::move(c) : nullptr;
  }

  // The servers that still hold `key`, as "server i (PTTL n)".
  std::vector<std::string> Holders(const std::string& key) {
    std::vector<std::string> holders;
    EXPECT_THAT(OnLoop([&] {
                  for (int i = 0; i < kServers; ++i) {
                    if (servers_[i]->Exists(key)) {
                      holders.push_back(
                          absl::StrCat("server ", i, " (PTTL ", servers_[i]->PTtl(key), ")"));
                    }
                  }
                }),
                IsOk());
    return holders;
  }

  // Every server forgets its scripts (SCRIPT FLUSH), as after a restart or
  // a failover, and with `acquire_cached` learns the acquire script again
  // (SCRIPT LOAD): the release script alone is then missing.
  void FlushScripts(bool acquire_cached) {
    ASSERT_THAT(OnLoop([this, acquire_cached] {
                  for (auto& s : servers_) {
                    s->Execute({"SCRIPT", "FLUSH"});
                    if (acquire_cached) s->Execute({"SCRIPT", "LOAD", AcquireScript().source()});
                  }
                }),
                IsOk());
  }

  UvLoopThread thread_;
  std::vector<std::unique_ptr<FakeRedis>> servers_;  // loop thread only
};

// The fast servers answer in 1 ms; the slow one applies each command 1 ms
// after it was sent but its reply takes 40 ms (under RedLock's 50 ms
// per-server deadline).
std::vector<absl::Duration> FastFastSlow() {
  return {absl::Milliseconds(1), absl::Milliseconds(1), absl::Milliseconds(41)};
}

// The release script is not cached: on the slow server the acquire has set
// the key, the release's EVALSHA got NOSCRIPT and its EVAL goes out only
// when that reply arrives, 40 ms later -- long after Unlock returned at
// quorum and the client was destroyed.
TEST_F(BlockingClientReleaseDrainTest, DestroyedClientFinishesANoscriptFallbackRelease) {
  FlushScripts(/*acquire_cached=*/true);
  auto client = MustCreate(FastFastSlow());
  ASSERT_NE(client, nullptr);
  absl::StatusOr<LockGuard> g = client->TryLock("invoice-run", absl::Seconds(10));
  ASSERT_THAT(g.status(), IsOk());
  ASSERT_THAT(g->Unlock(), IsOk());  // at quorum: the slow server has not answered
  client.reset();
  EXPECT_THAT(Holders("dlock:{invoice-run}"), IsEmpty());
}

// A guard still held when the client goes: the destructor releases it (at
// quorum), and that release too finishes on the slow server.
TEST_F(BlockingClientReleaseDrainTest, DestroyedClientFinishesTheReleaseOfAHeldGuard) {
  FlushScripts(/*acquire_cached=*/true);
  auto client = MustCreate(FastFastSlow());
  ASSERT_NE(client, nullptr);
  absl::StatusOr<LockGuard> g = client->TryLock("invoice-run", absl::Seconds(10));
  ASSERT_THAT(g.status(), IsOk());
  client.reset();
  EXPECT_FALSE(g->IsValid());
  EXPECT_THAT(Holders("dlock:{invoice-run}"), IsEmpty());
}

// A server whose replies are lost holds the destructor up by at most the
// release timeout (command_timeout here): it returns, and the servers that
// answered no longer hold the key. (Only a hang fails this.)
TEST_F(BlockingClientReleaseDrainTest, ASilentServerDoesNotHoldTheDestructorForever) {
  FlushScripts(/*acquire_cached=*/true);
  FakeTransport* slow = nullptr;
  BlockingClientOptions options;
  options.command_timeout = absl::Milliseconds(300);
  auto client = MustCreate(FastFastSlow(), options, &slow);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<LockGuard> g = client->TryLock("invoice-run", absl::Seconds(10));
  ASSERT_THAT(g.status(), IsOk());
  ASSERT_THAT(OnLoop([slow] { slow->DropNextReplies(1000); }), IsOk());
  ASSERT_THAT(g->Unlock(), IsOk());
  client.reset();
  std::vector<std::string> holders = Holders("dlock:{invoice-run}");
  for (const std::string& h : holders) EXPECT_EQ(h.rfind("server 2", 0), 0u) << h;
}

}  // namespace
}  // namespace dlock
