// Tests of FaultProxy against an echo server: each fault does what it says
// (delay applied, stall holds then releases, blackhole drops, reset closes,
// refuse resets new connections), order within a connection is kept, and
// Heal lifts everything.
#include "dlock/tests/netfault/fault_proxy.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/tests/netfault/test_sockets.h"
#include "gtest/gtest.h"

namespace dlock {
namespace netfault {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(10);

class FaultProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(echo_.ok());
    FaultProxyOptions o;
    o.target_port = echo_.port();
    o.seed = 7;
    auto p = FaultProxy::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    proxy_ = *std::move(p);
  }
  int Connect() { return ConnectTo("127.0.0.1", proxy_->port()); }

  EchoServer echo_;
  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(FaultProxyTest, ForwardsBothWaysWithoutFaults) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "hello"));
  EXPECT_EQ(RecvN(fd, 5, kPatience), "hello");
  EXPECT_EQ(proxy_->stats().forwarded[0], 5);
  EXPECT_EQ(proxy_->stats().forwarded[1], 5);
  close(fd);
}

TEST_F(FaultProxyTest, RejectsABadTarget) {
  FaultProxyOptions o;
  o.target_host = "not-an-address";
  o.target_port = 1;
  EXPECT_EQ(FaultProxy::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.target_host = "127.0.0.1";
  o.target_port = 0;
  EXPECT_EQ(FaultProxy::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FaultProxyTest, DelayHoldsEachDirectionAtLeastItsDelay) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "a"));
  ASSERT_EQ(RecvN(fd, 1, kPatience), "a");  // connected, no delay yet
  for (Direction d : {Direction::kToServer, Direction::kToClient}) {
    proxy_->SetDelay(d, absl::Milliseconds(150), absl::Milliseconds(50));
    absl::Time sent = absl::Now();
    ASSERT_TRUE(SendAll(fd, "b"));
    EXPECT_EQ(RecvN(fd, 1, kPatience), "b");
    EXPECT_GE(absl::Now() - sent, absl::Milliseconds(150)) << static_cast<int>(d);
    proxy_->SetDelay(d, absl::ZeroDuration());
  }
  close(fd);
}

TEST_F(FaultProxyTest, JitterNeverReordersBytesOfOneConnection) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  proxy_->SetDelay(Direction::kToServer, absl::Milliseconds(1), absl::Milliseconds(30));
  proxy_->SetDelay(Direction::kToClient, absl::ZeroDuration(), absl::Milliseconds(30));
  std::string all;
  for (int i = 0; i < 40; ++i) {
    std::string piece = std::to_string(i) + ",";
    all += piece;
    ASSERT_TRUE(SendAll(fd, piece));
    absl::SleepFor(absl::Milliseconds(1));  // separate reads, separate draws
  }
  EXPECT_EQ(RecvN(fd, all.size(), kPatience), all);
  close(fd);
}

TEST_F(FaultProxyTest, DifferentConnectionsAreReorderedByTheirDelays) {
  int slow = Connect();
  int fast = Connect();
  ASSERT_GE(slow, 0);
  ASSERT_GE(fast, 0);
  ASSERT_TRUE(SendAll(slow, "s"));
  ASSERT_TRUE(SendAll(fast, "f"));
  ASSERT_EQ(RecvN(slow, 1, kPatience), "s");
  ASSERT_EQ(RecvN(fast, 1, kPatience), "f");
  proxy_->SetDelay(Direction::kToServer, absl::Milliseconds(400));
  ASSERT_TRUE(SendAll(slow, "1"));  // read with a 400 ms delay
  ASSERT_TRUE(WaitFor([&] { return proxy_->stats().held[0] == 1; }, kPatience));
  proxy_->SetDelay(Direction::kToServer, absl::ZeroDuration());
  ASSERT_TRUE(SendAll(fast, "2"));  // sent later, arrives first
  EXPECT_EQ(RecvN(fast, 1, kPatience), "2");
  EXPECT_EQ(proxy_->stats().held[0], 1) << "the slow connection's byte overtook";
  EXPECT_EQ(RecvN(slow, 1, kPatience), "1");
  close(slow);
  close(fast);
}

TEST_F(FaultProxyTest, StallHoldsBytesUntilLiftedThenForwardsThemInOrder) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "x"));
  ASSERT_EQ(RecvN(fd, 1, kPatience), "x");
  proxy_->SetStalled(Direction::kToServer, true);
  ASSERT_TRUE(SendAll(fd, "abc"));
  ASSERT_TRUE(SendAll(fd, "def"));
  ASSERT_TRUE(WaitFor([&] { return proxy_->stats().held[0] == 6; }, kPatience));
  EXPECT_EQ(echo_.received(), 1);
  EXPECT_EQ(RecvN(fd, 1, absl::Milliseconds(100)), "");
  proxy_->SetStalled(Direction::kToServer, false);
  EXPECT_EQ(RecvN(fd, 6, kPatience), "abcdef");
  // The reply direction stalls the same way.
  proxy_->SetStalled(Direction::kToClient, true);
  ASSERT_TRUE(SendAll(fd, "gh"));
  ASSERT_TRUE(WaitFor([&] { return proxy_->stats().held[1] == 2; }, kPatience));
  EXPECT_EQ(echo_.received(), 9);
  proxy_->Heal();
  EXPECT_EQ(RecvN(fd, 2, kPatience), "gh");
  close(fd);
}

TEST_F(FaultProxyTest, BlackholeDropsBytesAndKeepsTheConnectionOpen) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "x"));
  ASSERT_EQ(RecvN(fd, 1, kPatience), "x");
  proxy_->SetBlackhole(Direction::kToServer, true);
  ASSERT_TRUE(SendAll(fd, "lost"));
  ASSERT_TRUE(WaitFor([&] { return proxy_->stats().dropped[0] == 4; }, kPatience));
  proxy_->SetBlackhole(Direction::kToServer, false);
  ASSERT_TRUE(SendAll(fd, "kept"));
  EXPECT_EQ(RecvN(fd, 4, kPatience), "kept");  // "lost" never arrives
  EXPECT_EQ(echo_.received(), 5);
  // One way only: the server gets it, the reply is dropped.
  proxy_->SetBlackhole(Direction::kToClient, true);
  ASSERT_TRUE(SendAll(fd, "one-way"));
  ASSERT_TRUE(WaitFor([&] { return proxy_->stats().dropped[1] == 7; }, kPatience));
  EXPECT_EQ(echo_.received(), 12);
  proxy_->Heal();
  ASSERT_TRUE(SendAll(fd, "z"));
  EXPECT_EQ(RecvN(fd, 1, kPatience), "z");
  close(fd);
}

TEST_F(FaultProxyTest, ResetClosesBothSides) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "x"));
  ASSERT_EQ(RecvN(fd, 1, kPatience), "x");
  EXPECT_EQ(proxy_->ResetConnections(), 1);
  int error = 0;
  EXPECT_EQ(RecvN(fd, 1, kPatience, &error), "");
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_TRUE(WaitFor([&] { return echo_.closed() == 1; }, kPatience));
  EXPECT_EQ(proxy_->stats().open, 0);
  close(fd);
  // New connections work again.
  fd = Connect();
  ASSERT_TRUE(SendAll(fd, "y"));
  EXPECT_EQ(RecvN(fd, 1, kPatience), "y");
  close(fd);
}

TEST_F(FaultProxyTest, RefuseResetsNewConnectionsUntilLifted) {
  proxy_->SetRefuse(true);
  int fd = Connect();  // the kernel accepts; the proxy resets it
  ASSERT_GE(fd, 0);
  int error = 0;
  SendAll(fd, "x");
  EXPECT_EQ(RecvN(fd, 1, kPatience, &error), "");
  EXPECT_NE(error, 0);
  EXPECT_EQ(echo_.received(), 0);
  close(fd);
  proxy_->Heal();
  fd = Connect();
  ASSERT_TRUE(SendAll(fd, "y"));
  EXPECT_EQ(RecvN(fd, 1, kPatience), "y");
  close(fd);
}

TEST_F(FaultProxyTest, ClientEofClosesTheServerSideAfterHeldBytes) {
  int fd = Connect();
  ASSERT_GE(fd, 0);
  proxy_->SetDelay(Direction::kToServer, absl::Milliseconds(100));
  ASSERT_TRUE(SendAll(fd, "last"));
  shutdown(fd, SHUT_WR);
  EXPECT_TRUE(WaitFor([&] { return echo_.closed() == 1; }, kPatience));
  EXPECT_EQ(echo_.received(), 4);  // delivered before the close
  close(fd);
}

}  // namespace
}  // namespace netfault
}  // namespace dlock
