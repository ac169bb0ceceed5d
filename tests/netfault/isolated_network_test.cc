// Tests of IsolatedNetwork: a cut link drops packets in the direction asked
// (TCP holds them and delivers after the restore), other links are
// untouched, non-loopback addresses are refused, and the thread returns to
// its own namespace. Skipped (never passed) where namespaces are
// unavailable.
#include "dlock/tests/netfault/isolated_network.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/time/time.h"
#include "dlock/tests/netfault/test_sockets.h"
#include "gtest/gtest.h"

namespace dlock {
namespace netfault {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(15);

ino_t NetNsInode() {
  struct stat st;
  if (stat("/proc/thread-self/ns/net", &st) != 0) return 0;
  return st.st_ino;
}

// Each test body runs on a thread inside its own namespace (RunIsolated);
// the test's thread never moves.
#define ISOLATED_TEST(name)                                               \
  void name##Body(IsolatedNetwork* net_);                                 \
  TEST(IsolatedNetworkTest, name) {                                       \
    absl::Status s = RunIsolated([](IsolatedNetwork& n) { name##Body(&n); }); \
    if (!s.ok()) GTEST_SKIP() << s.message();                             \
  }                                                                       \
  void name##Body(IsolatedNetwork* net_)

TEST(IsolatedNetworkTest, RunsOnItsOwnThreadInItsOwnNamespace) {
  const ino_t outside = NetNsInode();
  ino_t inside = 0;
  absl::Status s = RunIsolated([&](IsolatedNetwork&) { inside = NetNsInode(); });
  if (!s.ok()) GTEST_SKIP() << s.message();
  EXPECT_NE(inside, 0u);
  EXPECT_NE(inside, outside);
  EXPECT_EQ(NetNsInode(), outside);
}

ISOLATED_TEST(RefusesNonLoopbackAddresses) {
  EXPECT_EQ(net_->Cut({"10.0.0.1", 6379}, Direction::kToServer).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net_->Cut({"127.0.0.1", 0}, Direction::kToServer).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net_->cuts(), 0);
}

ISOLATED_TEST(CutToServerHoldsRequestsUntilRestored) {
  EchoServer echo("127.0.2.1");
  ASSERT_TRUE(echo.ok());
  int fd = ConnectTo("127.0.2.1", echo.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "a"));
  ASSERT_EQ(RecvN(fd, 1, kPatience), "a");
  Link link{"127.0.2.1", echo.port()};
  ASSERT_TRUE(net_->Cut(link, Direction::kToServer).ok());
  EXPECT_EQ(net_->cuts(), 1);
  ASSERT_TRUE(SendAll(fd, "b"));  // accepted by the local kernel, never sent
  EXPECT_EQ(RecvN(fd, 1, absl::Milliseconds(300)), "");
  EXPECT_EQ(echo.received(), 1);
  // New connections to the cut address fail at once.
  EXPECT_LT(ConnectTo("127.0.2.1", echo.port()), 0);
  // Another address of the same server is not cut.
  int other = ConnectTo("127.0.0.1", echo.port());
  EXPECT_LT(other, 0) << "the echo server listens on 127.0.2.1 only";
  ASSERT_TRUE(net_->Restore(link, Direction::kToServer).ok());
  EXPECT_EQ(net_->cuts(), 0);
  EXPECT_EQ(RecvN(fd, 1, kPatience), "b");  // TCP retransmitted it
  close(fd);
}

ISOLATED_TEST(CutToClientDropsRepliesOnlyOfThatLink) {
  EchoServer echo("127.0.3.1");
  EchoServer other("127.0.4.1");
  ASSERT_TRUE(echo.ok() && other.ok());
  int fd = ConnectTo("127.0.3.1", echo.port());
  int fd2 = ConnectTo("127.0.4.1", other.port());
  ASSERT_GE(fd, 0);
  ASSERT_GE(fd2, 0);
  ASSERT_TRUE(net_->Cut({"127.0.3.1", echo.port()}, Direction::kToClient).ok());
  ASSERT_TRUE(SendAll(fd, "q"));
  ASSERT_TRUE(WaitFor([&] { return echo.received() == 1; }, kPatience));  // request got in
  EXPECT_EQ(RecvN(fd, 1, absl::Milliseconds(300)), "");                   // reply did not
  ASSERT_TRUE(SendAll(fd2, "r"));
  EXPECT_EQ(RecvN(fd2, 1, kPatience), "r");  // the other link is untouched
  ASSERT_TRUE(net_->Heal().ok());
  EXPECT_EQ(net_->cuts(), 0);
  EXPECT_EQ(RecvN(fd, 1, kPatience), "q");
  close(fd);
  close(fd2);
}

ISOLATED_TEST(CutIsIdempotentAndBothWaysNeedsTwoCuts) {
  EchoServer echo("127.0.5.1");
  ASSERT_TRUE(echo.ok());
  Link link{"127.0.5.1", echo.port()};
  ASSERT_TRUE(net_->Cut(link, Direction::kToServer).ok());
  ASSERT_TRUE(net_->Cut(link, Direction::kToServer).ok());
  ASSERT_TRUE(net_->Cut(link, Direction::kToClient).ok());
  EXPECT_EQ(net_->cuts(), 2);
  ASSERT_TRUE(net_->Heal().ok());
  int fd = ConnectTo("127.0.5.1", echo.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "ok"));
  EXPECT_EQ(RecvN(fd, 2, kPatience), "ok");
  close(fd);
}

}  // namespace
}  // namespace netfault
}  // namespace dlock
