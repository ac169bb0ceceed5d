// Drives the real `dlock` binary (//cli:dlock) as a user would, against
// private redis-servers: exit codes, mutual exclusion of `dlock run`, the
// signal on a lost lock, and the output of `status` and `check`.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/tests/testing/redis_server.h"
#include "dlock/tests/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace dlock {
namespace {

using ::dlock::testing::IsOk;
using ::dlock::testing::RedisServer;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kExitUsage = 64;
constexpr int kExitBusy = 75;
constexpr int kExitUnsafe = 78;
constexpr int kExitLost = 79;
constexpr int kExitNotFound = 127;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// A running (or finished) dlock process with its output in files.
class Dlock {
 public:
  explicit Dlock(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    static int counter = 0;
    const std::string dir = std::getenv("TEST_TMPDIR");
    const std::string stem = absl::StrCat(dir, "/dlock-", getpid(), "-", ++counter);
    out_path_ = stem + ".out";
    err_path_ = stem + ".err";
    std::vector<std::string> argv = {Binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> cenv;
    for (std::string& e : env_strings) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    int rc = posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
  }
  ~Dlock() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
  }

  static std::string Binary() {
    return absl::StrCat(std::getenv("TEST_SRCDIR"), "/dlock/cli/dlock");
  }

  // Waits (bounded) for the exit; returns the exit code, 128+N for signal
  // N, or -1 on timeout.
  int Wait(absl::Duration timeout = absl::Seconds(20)) {
    if (exited_) return code_;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return code_;
      }
      // Waiting for an external process, bounded by `deadline`.
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }

  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
  std::string out_path_, err_path_;
};

// Waits (bounded) until `path` exists.
bool WaitForFile(const std::string& path, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (FileExists(path)) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

class DlockCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    url_ = absl::StrCat("redis://127.0.0.1:", server_->port());
    tmp_ = std::getenv("TEST_TMPDIR");
  }

  std::string Path(const std::string& name) {
    return absl::StrCat(tmp_, "/", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "-", name);
  }

  std::unique_ptr<RedisServer> server_;
  std::string url_;
  std::string tmp_;
};

TEST_F(DlockCliTest, RunExitsWithTheCommandsStatusAndReleases) {
  Dlock d({"run", "--redis", url_, "job", "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(d.Wait(), 3) << d.err();
  absl::StatusOr<Reply> key = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->integer, 0);
}

TEST_F(DlockCliTest, CommandSeesItsFencingToken) {
  const std::string f = Path("fence");
  Dlock d({"run", "--redis", url_, "job", "--", "sh", "-c",
           absl::StrCat("echo $DLOCK_RESOURCE $DLOCK_FENCE > ", f)});
  ASSERT_EQ(d.Wait(), 0) << d.err();
  EXPECT_EQ(ReadFile(f), "job 1\n");
}

TEST_F(DlockCliTest, TwoRacingRunsTakeTurns) {
  // Each command records its start and end (ns since the epoch) in its
  // own file; the intervals must not overlap.
  std::string a = Path("a"), b = Path("b");
  auto cmd = [](const std::string& file) {
    return absl::StrCat("date +%s%N > ", file, "; sleep 0.5; date +%s%N >> ", file);
  };
  Dlock first({"run", "--redis", url_, "--wait", "20s", "shared", "--", "sh", "-c", cmd(a)});
  Dlock second({"run", "--redis", url_, "--wait", "20s", "shared", "--", "sh", "-c", cmd(b)});
  ASSERT_EQ(first.Wait(), 0) << first.err();
  ASSERT_EQ(second.Wait(), 0) << second.err();
  auto interval = [](const std::string& file) {
    std::vector<std::string> lines =
        absl::StrSplit(ReadFile(file), '\n', absl::SkipEmpty());
    std::pair<int64_t, int64_t> out{0, 0};
    if (lines.size() == 2) {
      EXPECT_TRUE(absl::SimpleAtoi(lines[0], &out.first));
      EXPECT_TRUE(absl::SimpleAtoi(lines[1], &out.second));
    }
    return out;
  };
  auto ia = interval(a), ib = interval(b);
  ASSERT_GT(ia.first, 0);
  ASSERT_GT(ib.first, 0);
  EXPECT_TRUE(ia.second <= ib.first || ib.second <= ia.first)
      << "overlap: [" << ia.first << "," << ia.second << "] and [" << ib.first
      << "," << ib.second << "]";
  // The one that waited said what it waited for.
  EXPECT_THAT(first.err() + second.err(), HasSubstr("waiting up to"));
}

TEST_F(DlockCliTest, WaitZeroOnHeldLockExitsBusy) {
  ASSERT_THAT(server_->Command({"SET", "dlock:{job}", "someone-else", "PX", "60000"}), IsOk());
  const std::string marker = Path("ran");
  Dlock d({"run", "--redis", url_, "--wait", "0", "job", "--", "touch", marker});
  EXPECT_EQ(d.Wait(), kExitBusy) << d.err();
  EXPECT_THAT(d.err(), HasSubstr("busy"));
  EXPECT_FALSE(FileExists(marker));
}

TEST_F(DlockCliTest, LostLockSignalsTheCommand) {
  const std::string started = Path("started"), got = Path("got-term");
  const std::string script = absl::StrCat(
      "trap 'echo term > ", got, "; exit 0' TERM; touch ", started,
      "; while :; do sleep 0.05; done");
  Dlock d({"run", "--redis", url_, "--ttl", "1s", "--timeout", "200ms",
           "--on-lost", "term", "job", "--", "sh", "-c", script});
  ASSERT_TRUE(WaitForFile(started)) << d.err();
  ASSERT_THAT(server_->Pause(), IsOk());
  int code = d.Wait(absl::Seconds(15));
  ASSERT_THAT(server_->Resume(), IsOk());
  EXPECT_EQ(code, kExitLost) << d.err();
  EXPECT_EQ(ReadFile(got), "term\n");
  EXPECT_THAT(d.err(), HasSubstr("lost"));
}

TEST_F(DlockCliTest, CommandIsSignalledWhenDlockItselfDies) {
  // Nobody renews the lease once dlock is gone, so the command must not go
  // on as if it still held the lock.
  const std::string started = Path("started"), got = Path("got-term");
  const std::string script = absl::StrCat(
      "trap 'echo term > ", got, "; exit 0' TERM; touch ", started,
      "; while :; do sleep 0.05; done");
  Dlock d({"run", "--redis", url_, "job", "--", "sh", "-c", script});
  ASSERT_TRUE(WaitForFile(started)) << d.err();
  kill(d.pid(), SIGKILL);
  EXPECT_EQ(d.Wait(), 128 + SIGKILL);
  ASSERT_TRUE(WaitForFile(got));
  EXPECT_EQ(ReadFile(got), "term\n");
}

TEST_F(DlockCliTest, MissingCommandExits127) {
  Dlock d({"run", "--redis", url_, "job", "--", "/nonexistent/command"});
  EXPECT_EQ(d.Wait(), kExitNotFound) << d.err();
  absl::StatusOr<Reply> key = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->integer, 0);  // released
}

TEST_F(DlockCliTest, BadUrlsAndDurationsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"run", "--redis", "http://h:1", "r", "--", "true"}, "bad Redis URL"},
      {{"run", "--redis", "redis://h:99999", "r", "--", "true"}, "port"},
      {{"run", "--ttl", "30x", "r", "--", "true"}, "--ttl"},
      {{"run", "--wait", "-1s", "r", "--", "true"}, "--wait"},
      {{"run", "--ttl", "0", "r", "--", "true"}, "--ttl"},
      {{"run", "--on-lost", "explode", "r", "--", "true"}, "--on-lost"},
      {{"run", "r"}, "command after '--'"},
      {{"frobnicate"}, "unknown subcommand"},
      {{"--bogus", "check"}, "unknown flag"},
  };
  for (const Case& c : cases) {
    Dlock d(c.args);
    EXPECT_EQ(d.Wait(), kExitUsage) << c.message << ": " << d.err();
    EXPECT_THAT(d.err(), HasSubstr(c.message));
  }
}

TEST_F(DlockCliTest, HelpListsExitCodes) {
  Dlock d({"--help"});
  EXPECT_EQ(d.Wait(), 0);
  EXPECT_THAT(d.out(), HasSubstr("75 lock busy"));
  EXPECT_THAT(d.out(), HasSubstr("--on-lost"));
}

TEST_F(DlockCliTest, StatusShowsFreeThenHeldWithoutTheToken) {
  Dlock free({"status", "--redis", url_, "job"});
  ASSERT_EQ(free.Wait(), 0) << free.err();
  EXPECT_THAT(free.out(), HasSubstr("state: free"));

  const std::string token = "0123456789abcdef0123456789abcdef";
  ASSERT_THAT(server_->Command({"SET", "dlock:{job}", token, "PX", "60000"}), IsOk());
  ASSERT_THAT(server_->Command({"SET", "dlock:{job}:fence", "5"}), IsOk());
  Dlock held({"status", "--redis", url_, "job"});
  ASSERT_EQ(held.Wait(), 0) << held.err();
  EXPECT_THAT(held.out(), HasSubstr("held, expires in"));
  EXPECT_THAT(held.out(), HasSubstr("fence 5"));
  EXPECT_THAT(held.out(), HasSubstr("01234567..."));
  EXPECT_THAT(held.out(), Not(HasSubstr(token)));
  EXPECT_THAT(held.out(), HasSubstr("state: held"));
}

TEST_F(DlockCliTest, CheckPassesOnSafeServerAndFailsOnEvictingPolicy) {
  Dlock ok({"check", "--redis", url_});
  EXPECT_EQ(ok.Wait(), 0) << ok.out() << ok.err();
  EXPECT_THAT(ok.out(), HasSubstr("maxmemory-policy noeviction"));
  EXPECT_THAT(ok.out(), HasSubstr("scripting: EVAL works"));
  EXPECT_THAT(ok.out(), HasSubstr("latency: median"));

  ASSERT_THAT(server_->Command({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"}), IsOk());
  Dlock bad({"check", "--redis", url_});
  EXPECT_EQ(bad.Wait(), kExitUnsafe) << bad.out();
  EXPECT_THAT(bad.err(), HasSubstr("volatile-lru"));
  EXPECT_THAT(bad.out(), HasSubstr("result: UNSAFE"));
}

TEST_F(DlockCliTest, CheckUnreachableServerExitsUnavailable) {
  const int port = server_->port();
  ASSERT_THAT(server_->Kill(), IsOk());
  Dlock d({"check", "--redis", absl::StrCat("redis://127.0.0.1:", port), "--timeout", "500ms"});
  EXPECT_EQ(d.Wait(), 69) << d.out() << d.err();
  EXPECT_THAT(d.err(), HasSubstr("unreachable"));
}

TEST_F(DlockCliTest, RunUnreachableServerExitsUnavailable) {
  const int port = server_->port();
  ASSERT_THAT(server_->Kill(), IsOk());
  const std::string marker = Path("ran");
  Dlock d({"run", "--redis", absl::StrCat("redis://127.0.0.1:", port), "job", "--",
           "touch", marker});
  EXPECT_EQ(d.Wait(), 69) << d.err();
  EXPECT_THAT(d.err(), HasSubstr("unavailable"));
  EXPECT_FALSE(FileExists(marker));
}

TEST_F(DlockCliTest, VerbosePrintsLockAndRenewalEvents) {
  Dlock d({"run", "--redis", url_, "--ttl", "300ms", "--verbose", "job", "--", "sleep",
           "0.5"});
  ASSERT_EQ(d.Wait(), 0) << d.err();
  EXPECT_THAT(d.err(), HasSubstr("acquire simple \"job\": OK"));
  EXPECT_THAT(d.err(), HasSubstr("renewal \"job\": OK"));
  EXPECT_THAT(d.err(), HasSubstr("release simple \"job\": OK"));
}

TEST_F(DlockCliTest, PasswordComesFromTheEnvironment) {
  absl::StatusOr<std::unique_ptr<RedisServer>> secured =
      RedisServer::Start({.password = "s3cret"});
  ASSERT_THAT(secured, IsOk());
  const std::string url = absl::StrCat("redis://127.0.0.1:", (*secured)->port());
  Dlock without({"run", "--redis", url, "--timeout", "500ms", "job", "--", "true"},
                {"DLOCK_REDIS_PASSWORD="});
  EXPECT_EQ(without.Wait(), 64) << without.err();  // NOAUTH: permanent, fix the config
  Dlock with({"run", "--redis", url, "job", "--", "true"}, {"DLOCK_REDIS_PASSWORD=s3cret"});
  EXPECT_EQ(with.Wait(), 0) << with.err();
  EXPECT_THAT(with.err(), Not(HasSubstr("s3cret")));
}

TEST_F(DlockCliTest, UnixSocketUrlWorks) {
  absl::StatusOr<std::unique_ptr<RedisServer>> local =
      RedisServer::Start({.unix_socket = true});
  ASSERT_THAT(local, IsOk());
  Dlock d({"status", "--redis", absl::StrCat("unix://", (*local)->unix_socket()), "job"});
  ASSERT_EQ(d.Wait(), 0) << d.err();
  EXPECT_THAT(d.out(), HasSubstr("unix:/"));
  EXPECT_THAT(d.out(), HasSubstr("state: free"));
}

class DlockCliRedLockTest : public DlockCliTest {
 protected:
  void SetUp() override {
    DlockCliTest::SetUp();
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start();
      ASSERT_THAT(s, IsOk());
      more_.push_back(*std::move(s));
    }
  }
  std::vector<std::string> RedisFlags() {
    std::vector<std::string> flags = {"--redis", url_};
    for (auto& s : more_) {
      flags.push_back("--redis");
      flags.push_back(absl::StrCat("redis://127.0.0.1:", s->port()));
    }
    return flags;
  }
  std::vector<std::unique_ptr<RedisServer>> more_;
};

TEST_F(DlockCliRedLockTest, RunWithSeveralServersUsesAQuorumAndSurvivesOneDown) {
  ASSERT_THAT(more_[0]->Kill(), IsOk());
  const std::string f = Path("fence");
  std::vector<std::string> args = {"run"};
  for (const std::string& a : RedisFlags()) args.push_back(a);
  args.insert(args.end(), {"--verbose", "job", "--", "sh", "-c",
                           absl::StrCat("echo $DLOCK_FENCE > ", f)});
  Dlock d(args);
  ASSERT_EQ(d.Wait(), 0) << d.err();
  EXPECT_EQ(ReadFile(f), "1\n");
  EXPECT_THAT(d.err(), HasSubstr("vote acquire"));
  EXPECT_THAT(d.err(), HasSubstr("acquire redlock \"job\": OK"));
}

TEST_F(DlockCliRedLockTest, RunIsBusyWhenAQuorumIsHeld) {
  ASSERT_THAT(server_->Command({"SET", "dlock:{job}", "other", "PX", "60000"}), IsOk());
  ASSERT_THAT(more_[0]->Command({"SET", "dlock:{job}", "other", "PX", "60000"}), IsOk());
  std::vector<std::string> args = {"run"};
  for (const std::string& a : RedisFlags()) args.push_back(a);
  args.insert(args.end(), {"job", "--", "true"});
  Dlock d(args);
  EXPECT_EQ(d.Wait(), kExitBusy) << d.err();

  std::vector<std::string> status = {"status"};
  for (const std::string& a : RedisFlags()) status.push_back(a);
  status.push_back("job");
  Dlock st(status);
  ASSERT_EQ(st.Wait(), 0) << st.err();
  EXPECT_THAT(st.out(), HasSubstr("state: held (held on 2 of 3 servers, quorum 2)"));
}

TEST_F(DlockCliRedLockTest, CheckWarnsAboutRestartsAndStrictMakesItFatal) {
  std::vector<std::string> args = {"check"};
  for (const std::string& a : RedisFlags()) args.push_back(a);
  Dlock lenient(args);
  EXPECT_EQ(lenient.Wait(), 0) << lenient.out();
  EXPECT_THAT(lenient.out(), HasSubstr("delayed restart"));
  EXPECT_THAT(lenient.out(), HasSubstr("RedLock over 3 servers, quorum 2"));
  args.push_back("--strict");
  Dlock strict(args);
  EXPECT_EQ(strict.Wait(), kExitUnsafe) << strict.out();
}

}  // namespace
}  // namespace dlock
