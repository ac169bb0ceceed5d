// BlockingClient over rediss:// (ConnectOptions::tls), alone and in a
// RedLock that mixes plain and TLS servers.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/blocking/connect.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/tls_test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::StatusIs;
using ::dlock::test_support::TlsTestServer;
using ::testing::HasSubstr;

TEST(BlockingClientTlsTest, LocksOverTls) {
  auto server = TlsTestServer::Start();
  ASSERT_THAT(server, IsOk());
  ConnectOptions o;
  o.redis_urls = {(*server)->url()};
  o.tls = (*server)->client_tls();
  auto client = ConnectBlockingClient(o);
  ASSERT_THAT(client, IsOk());
  {
    auto guard = (*client)->TryLock("res", absl::Seconds(10));
    ASSERT_THAT(guard, IsOk());
    EXPECT_THAT((*client)->TryLock("res", absl::Seconds(10)),
                StatusIs(absl::StatusCode::kAborted));
  }
  EXPECT_THAT((*client)->TryLock("res", absl::Seconds(10)), IsOk());
}

TEST(BlockingClientTlsTest, ConnectNamesTheTlsFailure) {
  auto server = TlsTestServer::Start();
  ASSERT_THAT(server, IsOk());
  ConnectOptions o;
  o.redis_urls = {(*server)->url()};
  o.tls.ca_file = (*server)->file("other-ca.pem");
  o.connect_timeout = absl::Seconds(2);
  EXPECT_THAT(ConnectBlockingClient(o),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("unknown CA")));
}

TEST(BlockingClientTlsTest, RedLockOverPlainAndTlsServers) {
  // Two servers, quorum 2: Connect waits for both, and the lock needs the
  // TLS server's vote.
  auto tls = TlsTestServer::Start();
  auto plain = RedisServer::Start();
  ASSERT_THAT(tls, IsOk());
  ASSERT_THAT(plain, IsOk());
  ConnectOptions o;
  o.redis_urls = {absl::StrCat("redis://", (*plain)->address()), (*tls)->url()};
  o.tls = (*tls)->client_tls();
  auto client = ConnectBlockingClient(o);
  ASSERT_THAT(client, IsOk());
  EXPECT_EQ((*client)->server_count(), 2u);
  auto guard = (*client)->TryLock("res", absl::Seconds(10));
  ASSERT_THAT(guard, IsOk());
  auto keys = (*tls)->server().Command({"KEYS", "*res*"});
  ASSERT_THAT(keys, IsOk());
  EXPECT_TRUE(keys->is_array() && !keys->elements.empty()) << keys->DebugString();
}

}  // namespace
}  // namespace dlock
