#include "dlock/transport/uv/redis_url.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "dlock/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

constexpr char kEnv[] = "DLOCK_TEST_REDIS_PASSWORD";

class RedisUrlTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kEnv); }
  void TearDown() override { unsetenv(kEnv); }
};

TEST_F(RedisUrlTest, ParsesHostPortAndDefaults) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("redis://127.0.0.1:7001", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->kind, RedisUrl::Kind::kTcp);
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 7001);
  EXPECT_EQ(url->db, 0);
  EXPECT_EQ(url->user, "");
  EXPECT_EQ(url->password, "");
  EXPECT_EQ(url->Display(), "127.0.0.1:7001");

  url = ParseRedisUrl("redis://cache.internal", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->port, 6379);
}

TEST_F(RedisUrlTest, ParsesUserPasswordAndDb) {
  absl::StatusOr<RedisUrl> url =
      ParseRedisUrl("redis://alice:p%40ss:w@host:6380/3", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->user, "alice");
  EXPECT_EQ(url->password, "p@ss:w");
  EXPECT_EQ(url->host, "host");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->db, 3);
  EXPECT_EQ(url->Display(), "host:6380/3");  // no credentials

  url = ParseRedisUrl("redis://:secret@host:1", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->user, "");
  EXPECT_EQ(url->password, "secret");
}

TEST_F(RedisUrlTest, ParsesBracketedIpv6) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("redis://[::1]:6390/1", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 6390);
  EXPECT_EQ(url->Display(), "[::1]:6390/1");
}

TEST_F(RedisUrlTest, ParsesUnixSocket) {
  absl::StatusOr<RedisUrl> url =
      ParseRedisUrl("unix:///run/redis/redis.sock?db=2", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->kind, RedisUrl::Kind::kUnix);
  EXPECT_EQ(url->path, "/run/redis/redis.sock");
  EXPECT_EQ(url->db, 2);

  url = ParseRedisUrl("unix://bob:pw@/tmp/r.sock", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->user, "bob");
  EXPECT_EQ(url->password, "pw");
  EXPECT_EQ(url->path, "/tmp/r.sock");
  EXPECT_EQ(url->Display(), "unix:/tmp/r.sock");
}

TEST_F(RedisUrlTest, PasswordComesFromEnvironmentWhenUrlHasNone) {
  setenv(kEnv, "from-env", 1);
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("redis://u@h:1", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->user, "u");
  EXPECT_EQ(url->password, "from-env");

  url = ParseRedisUrl("redis://:inline@h:1", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->password, "inline");  // the URL wins
}

TEST_F(RedisUrlTest, RejectsMalformedUrlsWithReason) {
  struct Case {
    const char* url;
    const char* reason;
  } cases[] = {
      {"http://h:1", "unknown scheme"},
      {"127.0.0.1:6379", "unknown scheme"},
      {"rediss://", "missing host"},
      {"rediss://h:0", "port"},
      {"redis://", "missing host"},
      {"redis://:1", "missing host"},
      {"redis://h:0", "port"},
      {"redis://h:65536", "port"},
      {"redis://h:12x", "port"},
      {"redis://h:", "port"},
      {"redis://h:1/x", "database"},
      {"redis://h:1/-1", "database"},
      {"redis://u:@h:1", "empty password"},
      {"redis://u:%zz@h:1", "escape"},
      {"redis://[::1:1", "unterminated"},
      {"redis://::1", "IPv6"},
      {"unix://relative.sock", "absolute"},
      {"unix:///", "missing socket path"},
      {"unix:///s?x=1", "db=N"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<RedisUrl> url = ParseRedisUrl(c.url, kEnv);
    EXPECT_THAT(url, StatusIs(absl::StatusCode::kInvalidArgument)) << c.url;
    EXPECT_THAT(url.status().message(), HasSubstr(c.reason)) << c.url;
  }
}

TEST_F(RedisUrlTest, ErrorsNeverRepeatThePassword) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("redis://alice:s3cret@h:notaport");
  ASSERT_FALSE(url.ok());
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(url.status().message()).find("s3cret"), std::string::npos)
      << url.status();
  EXPECT_NE(std::string(url.status().message()).find("redis://***@h:notaport"),
            std::string::npos)
      << url.status();
}

TEST_F(RedisUrlTest, ParsesTlsUrls) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("rediss://u:p@localhost:6380/2", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->kind, RedisUrl::Kind::kTcp);
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "localhost");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->user, "u");
  EXPECT_EQ(url->password, "p");
  EXPECT_EQ(url->db, 2);
  EXPECT_EQ(url->Display(), "tls:localhost:6380/2");
  url = ParseRedisUrl("redis://localhost:6380", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_FALSE(url->tls);
}

TEST_F(RedisUrlTest, TransportOptionsCarryEverythingTheUrlSays) {
  TlsOptions tls;
  tls.ca_file = "/ca.pem";
  tls.server_name = "redis.example";
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("rediss://u:p@h:7/3", kEnv);
  ASSERT_THAT(url, IsOk());
  UvTransportOptions o = TransportOptionsForUrl(*url, tls);
  EXPECT_TRUE(o.tls);
  EXPECT_EQ(o.connection.host, "h");
  EXPECT_EQ(o.connection.port, 7);
  EXPECT_EQ(o.connection.username, "u");
  EXPECT_EQ(o.connection.password, "p");
  EXPECT_EQ(o.connection.db, 3);
  EXPECT_EQ(o.tls_options.ca_file, "/ca.pem");
  EXPECT_EQ(o.tls_options.server_name, "redis.example");

  // TLS settings only apply to rediss:// (a RedLock may mix servers).
  url = ParseRedisUrl("redis://h:8", kEnv);
  ASSERT_THAT(url, IsOk());
  o = TransportOptionsForUrl(*url, tls);
  EXPECT_FALSE(o.tls);
  EXPECT_EQ(o.connection.port, 8);
  EXPECT_EQ(o.tls_options.ca_file, "");

  url = ParseRedisUrl("unix:///tmp/r.sock?db=4", kEnv);
  ASSERT_THAT(url, IsOk());
  o = TransportOptionsForUrl(*url, tls);
  EXPECT_FALSE(o.tls);
  EXPECT_EQ(o.connection.unix_socket, "/tmp/r.sock");
  EXPECT_EQ(o.connection.db, 4);
}


TEST_F(RedisUrlTest, ParsesSentinelUrl) {
  unsetenv(kSentinelPasswordEnv);
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(
      "redis-sentinel://alice:pw@s1:26380,[::1],10.0.0.3:5000/my%2Fmaster"
      "?db=2&sentinel_user=sen&sentinel_password=p%26q",
      kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->kind, RedisUrl::Kind::kSentinel);
  ASSERT_EQ(url->sentinels.size(), 3u);
  EXPECT_EQ(url->sentinels[0].host, "s1");
  EXPECT_EQ(url->sentinels[0].port, 26380);
  EXPECT_EQ(url->sentinels[1].host, "::1");
  EXPECT_EQ(url->sentinels[1].port, 26379);
  EXPECT_EQ(url->sentinels[2].port, 5000);
  EXPECT_EQ(url->master_name, "my/master");
  EXPECT_EQ(url->user, "alice");
  EXPECT_EQ(url->password, "pw");
  EXPECT_EQ(url->db, 2);
  EXPECT_EQ(url->sentinel_user, "sen");
  EXPECT_EQ(url->sentinel_password, "p&q");
  EXPECT_EQ(url->Display(), "sentinel:s1:26380,[::1]:26379,10.0.0.3:5000/my/master?db=2");

  UvTransportOptions o = TransportOptionsForUrl(*url);
  EXPECT_TRUE(o.sentinel);
  EXPECT_EQ(o.master_name, "my/master");
  EXPECT_EQ(o.sentinel_password, "p&q");
  EXPECT_EQ(o.connection.password, "pw");
  EXPECT_EQ(o.connection.db, 2);
}

TEST_F(RedisUrlTest, SentinelPasswordComesFromItsOwnEnvironmentVariable) {
  setenv(kSentinelPasswordEnv, "from-env", 1);
  absl::StatusOr<RedisUrl> url = ParseRedisUrl("redis-sentinel://h/m", kEnv);
  unsetenv(kSentinelPasswordEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->sentinel_password, "from-env");
  EXPECT_EQ(url->password, "");
}

TEST_F(RedisUrlTest, RejectsBadSentinelUrls) {
  unsetenv(kSentinelPasswordEnv);
  for (const char* bad : {"redis-sentinel://h:26379", "redis-sentinel://h:26379/",
                          "redis-sentinel:///m", "redis-sentinel://h,,h2/m",
                          "redis-sentinel://h:0/m", "redis-sentinel://h/m?db=x",
                          "redis-sentinel://h/m?color=red", "redis-sentinel://h/m/x",
                          "redis-sentinel://h/m?sentinel_user=u"}) {
    EXPECT_THAT(ParseRedisUrl(bad, kEnv), StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(
      "redis-sentinel://u:secret@h/m?sentinel_password=hush&color=red", kEnv);
  EXPECT_THAT(url.status().message(), ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(url.status().message(), ::testing::Not(HasSubstr("hush")));
}

}  // namespace
TEST_F(RedisUrlTest, ParsesClusterSeeds) {
  absl::StatusOr<RedisUrl> url =
      ParseRedisUrl("redis-cluster://al%40ce:pw@seed1:7000,[::1]:7001,seed3", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->kind, RedisUrl::Kind::kCluster);
  ASSERT_EQ(url->seeds.size(), 3u);
  EXPECT_EQ(url->seeds[0].host, "seed1");
  EXPECT_EQ(url->seeds[0].port, 7000);
  EXPECT_EQ(url->seeds[1].host, "::1");
  EXPECT_EQ(url->seeds[1].port, 7001);
  EXPECT_EQ(url->seeds[2].port, 6379);
  EXPECT_EQ(url->user, "al@ce");
  EXPECT_EQ(url->password, "pw");
  EXPECT_EQ(url->Display(), "cluster:seed1:7000,[::1]:7001,seed3:6379");
  UvTransportOptions o = TransportOptionsForUrl(*url);
  ASSERT_EQ(o.cluster_seeds.size(), 3u);
  EXPECT_EQ(o.cluster_seeds[1], std::make_pair(std::string("::1"), 7001));
  EXPECT_EQ(o.connection.password, "pw");

  setenv(kEnv, "from-env", 1);
  url = ParseRedisUrl("redis-cluster://127.0.0.1:7000/", kEnv);
  ASSERT_THAT(url, IsOk());
  EXPECT_EQ(url->password, "from-env");
  EXPECT_TRUE(TransportOptionsForUrl(ParseRedisUrl("redis://h", kEnv).value())
                  .cluster_seeds.empty());
}

TEST_F(RedisUrlTest, RejectsBadClusterUrls) {
  for (const char* bad : {"redis-cluster://", "redis-cluster://a:1,,b:2",
                          "redis-cluster://a:0", "redis-cluster://a:1/3",
                          "redis-cluster://a:1,b:x", "redis-cluster://::1:7000"}) {
    EXPECT_THAT(ParseRedisUrl(bad, kEnv), StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

}  // namespace dlock
