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
#include "dlock/transport/uv/tls_test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::TlsTestServer;
using ::testing::HasSubstr;

constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs dlock with `args` to completion (bounded); output kept in files.
struct Result {
  int code = -1;
  std::string out, err;
};

Result RunDlock(std::vector<std::string> args) {
  static int counter = 0;
  const std::string stem =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/dlock-tls-", getpid(), "-", ++counter);
  std::vector<std::string> argv = {
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/dlock/cli/dlock")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (stem + ".out").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (stem + ".err").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Result r;
  if (rc != 0) return r;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      r.err = "timed out";
      return r;
    }
    absl::SleepFor(absl::Milliseconds(10));  // waiting for an external process
  }
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = ReadFile(stem + ".out");
  r.err = ReadFile(stem + ".err");
  return r;
}

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
  std::string Path(const std::string& name) {
    return absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-",
                        name);
  }
  std::unique_ptr<TlsTestServer> server_;
  std::string url_;
};

TEST_F(DlockCliTlsTest, RunOverTlsWithTheServersCa) {
  const std::string f = Path("fence");
  Result r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"), "job",
                       "--", "sh", "-c", absl::StrCat("echo $DLOCK_FENCE > ", f)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(f), "1\n");
  // Released: the key is gone.
  EXPECT_THAT(server_->server().Command({"EXISTS", "dlock:{job}"}),
              test_support::IsOkAndHolds(Reply::Integer(0)));
}

TEST_F(DlockCliTlsTest, CertificateFromAnotherCaExits69WithTheReason) {
  const std::string marker = Path("ran");
  Result r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("other-ca.pem"),
                       "--timeout", "1s", "job", "--", "touch", marker});
  EXPECT_EQ(r.code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unknown CA"));
  EXPECT_TRUE(ReadFile(marker).empty());
}

TEST_F(DlockCliTlsTest, WrongServerNameExits69WithTheReason) {
  Result r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"),
                       "--tls-server-name", "other.example", "--timeout", "1s", "job", "--",
                       "true"});
  EXPECT_EQ(r.code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr("does not match"));
}

TEST_F(DlockCliTlsTest, MutualTlsWithClientCertificate) {
  Start({.require_client_cert = true});
  Result r = RunDlock({"run", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem"),
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
  Result r = RunDlock({"check", "--redis", url_, "--tls-ca-cert", server_->file("ca.pem")});
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
  Result r = RunDlock({"check", "--redis", absl::StrCat("redis://127.0.0.1:", server_->tls_port()),
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
  Result r = RunDlock({"run", "--redis", absl::StrCat("redis://127.0.0.1:", (*plain)->port()),
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
