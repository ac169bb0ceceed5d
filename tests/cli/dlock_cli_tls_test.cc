// Drives the real `dlock` binary over TLS (rediss://) against a private
// redis-server with a throw-away CA (//transport/uv:tls_test_server).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/cli/dlock_process.h"
#include "dlock/transport/uv/tls_test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::TlsTestServer;
using ::testing::HasSubstr;
using cli_test::kExitUnavailable;
using cli_test::kExitUsage;
using cli_test::Outcome;
using cli_test::ReadFile;
using cli_test::RunDlock;

class DlockCliTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(test_support::TlsTestServerOptions options) {
    server_.reset();
    auto server = TlsTestServer::Start(std::move(options));
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    url_ = server_->url();
  }
  std::string Path(const std::string& name) { return cli_test::TestPath(name); }
  std::unique_ptr<TlsTestServer> server_;
  std::string url_;
};

TEST_F(DlockCliTlsTest, RunOverTlsWithTheServersCa) {
  const std::string f = Path("fence");
  Outcome r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"), "job",
                       "--", "sh", "-c", absl::StrCat("echo $DLOCK_FENCE > ", f)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(f), "1\n");
  // Released: the key is gone.
  EXPECT_THAT(server_->server().Command({"EXISTS", "dlock:{job}"}),
              test_support::IsOkAndHolds(Reply::Integer(0)));
}

TEST_F(DlockCliTlsTest, CertificateFromAnotherCaExits69WithTheReason) {
  const std::string marker = Path("ran");
  Outcome r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("other-ca.pem"),
                       "--timeout", "1s", "job", "--", "touch", marker});
  EXPECT_EQ(r.code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unknown CA"));
  EXPECT_TRUE(ReadFile(marker).empty());
}

TEST_F(DlockCliTlsTest, WrongServerNameExits69WithTheReason) {
  Outcome r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"),
                       "--tls-server-name", "other.example", "--timeout", "1s", "job", "--",
                       "true"});
  EXPECT_EQ(r.code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr("does not match"));
}

TEST_F(DlockCliTlsTest, MutualTlsWithClientCertificate) {
  Start({.require_client_cert = true});
  Outcome r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"),
                       "--tls-cert", server_->file("client.pem"), "--tls-key",
                       server_->file("client.key"), "job", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"), "--timeout",
                "1s", "job", "--", "true"});
  EXPECT_EQ(r.code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr("client certificate"));
  r = RunDlock({"run", "--redis", url_, "--tls-cert", server_->file("client.pem"), "job", "--",
                "true"});
  EXPECT_EQ(r.code, kExitUsage) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--tls-key"));
}

TEST_F(DlockCliTlsTest, CheckSaysTlsAndWarnsWhenVerificationIsOff) {
  Outcome r = RunDlock({"check", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem")});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("tls:localhost:"));
  EXPECT_THAT(r.out, HasSubstr("TLS: server certificate verified"));
  r = RunDlock({"check", "--redis", url_, "--tls-insecure-skip-verify"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("WARN"));
  EXPECT_THAT(r.out, HasSubstr("--tls-insecure-skip-verify"));
  r = RunDlock({"check", "--strict", "--redis", url_, "--tls-insecure-skip-verify"});
  EXPECT_EQ(r.code, 78) << r.out << r.err;
}

TEST_F(DlockCliTlsTest, CheckNamesATlsPortReachedWithRedisScheme) {
  Outcome r = RunDlock({"check", "--redis", absl::StrCat("redis://127.0.0.1:", server_->tls_port()),
                       "--timeout", "1s"});
  EXPECT_EQ(r.code, kExitUnavailable) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("use rediss://"));
}

TEST_F(DlockCliTlsTest, RedLockOverPlainAndTlsServers) {
  // Two servers, quorum 2: the TLS server's vote is needed. --wait lets a
  // first attempt that beat the TLS handshake be retried.
  auto plain = RedisServer::Start();
  ASSERT_THAT(plain, IsOk());
  const std::string f = Path("fence");
  Outcome r = RunDlock({"run", "--redis", absl::StrCat("redis://127.0.0.1:", (*plain)->port()),
                       "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"), "--wait",
                       "10s", "--verbose", "job", "--", "sh", "-c",
                       absl::StrCat("echo $DLOCK_FENCE > ", f)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(f), "1\n");
  EXPECT_THAT(r.err, HasSubstr("acquire redlock \"job\": OK"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex("vote acquire \"job\" server #1 tls:localhost:[0-9]+: OK"));
}

}  // namespace
}  // namespace dlock
