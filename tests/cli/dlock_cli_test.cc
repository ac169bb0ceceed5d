// Drives the real `dlock` binary (//cli:dlock) as a user would, against
// private redis-servers: exit codes, mutual exclusion of `dlock run`, the
// signal on a lost lock, and the output of `status` and `check`.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/cli/dlock_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::testing::HasSubstr;
using ::testing::Not;
using cli_test::Dlock;
using cli_test::FileExists;
using cli_test::kExitBusy;
using cli_test::kExitInternal;
using cli_test::kExitLost;
using cli_test::kExitNotFound;
using cli_test::kExitUnavailable;
using cli_test::kExitUnsafe;
using cli_test::kExitUsage;
using cli_test::ReadFile;
using cli_test::WaitForFile;
using cli_test::WaitForText;

// True when `pid` no longer runs: gone, or a zombie waiting for its parent
// (init) to reap it.
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t paren = stat.rfind(')');
  if (stat.empty() || paren == std::string::npos) return true;
  return paren + 2 < stat.size() && (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
}

// Reads a pid written by a test command (waits, bounded, for the file).
pid_t ReadPid(const std::string& path) {
  if (!WaitForText(path, "\n")) return -1;
  int pid = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &pid)) return -1;
  return pid;
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

  std::string Path(const std::string& name) { return cli_test::TestPath(name); }

  // Waits (bounded) until the fair queue of `resource` holds `n` waiters
  // (the hash also holds its "#next" counter).
  bool FairWaiters(const std::string& resource, int64_t n) {
    const std::string key = absl::StrCat("dlock:{", resource, "}:queue");
    for (int i = 0; i < 500; ++i) {
      absl::StatusOr<Reply> r = server_->Command({"HLEN", key});
      if (r.ok() && r->is_integer() && r->integer == n + 1) return true;
      usleep(10000);  // polling an external process's progress, bounded
    }
    return false;
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
  // The file appears whole (written aside, then renamed): WaitForFile
  // sees it only once it says "term", never empty between the shell's
  // create and its write.
  const std::string script = absl::StrCat(
      "trap 'echo term > ", got, ".tmp && mv ", got, ".tmp ", got, "; exit 0' TERM; touch ",
      started, "; while :; do sleep 0.05; done");
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

// --fair: runs that queued one after another get the lock in that order
// (the command machinery is the same as without it).
TEST_F(DlockCliTest, FairRunsAreServedInTheOrderTheyQueued) {
  const std::string order = Path("order"), go = Path("go"), started = Path("started");
  Dlock holder({"run", "--redis", url_, "--fair", "job", "--", "sh", "-c",
                absl::StrCat("touch ", started, "; while [ ! -e ", go,
                             " ]; do sleep 0.02; done")});
  ASSERT_TRUE(WaitForFile(started)) << holder.err();
  auto queued = [&](int64_t n) { return FairWaiters("job", n); };
  std::vector<std::unique_ptr<Dlock>> waiters;
  for (int i = 1; i <= 3; ++i) {
    waiters.push_back(std::make_unique<Dlock>(std::vector<std::string>{
        "run", "--redis", url_, "--fair", "--wait", "20s", "job", "--", "sh", "-c",
        absl::StrCat("echo ", i, " >> ", order)}));
    ASSERT_TRUE(queued(i)) << waiters.back()->err();
  }
  ASSERT_TRUE(std::ofstream(go).good());
  EXPECT_EQ(holder.Wait(), 0) << holder.err();
  for (auto& w : waiters) EXPECT_EQ(w->Wait(), 0) << w->err();
  EXPECT_EQ(ReadFile(order), "1\n2\n3\n");
}

// `dlock status` shows the fair queue: a --fair run waiting behind a holder
// is listed with its entry's remaining expiry; once it has the lock, the
// queue is empty again.
TEST_F(DlockCliTest, StatusListsTheFairQueueInOrder) {
  const std::string go = Path("go"), started = Path("started"), second = Path("second");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0);
  Dlock holder({"run", "--redis", url_, "--fair", "job", "--", "sh", "-c",
                absl::StrCat("touch ", started, "; cat ", go, " > /dev/null")});
  ASSERT_TRUE(WaitForFile(started)) << holder.err();
  auto queued = [&](int64_t n) { return FairWaiters("job", n); };
  Dlock first({"run", "--redis", url_, "--fair", "--wait", "20s", "job", "--", "true"});
  ASSERT_TRUE(queued(1)) << first.err();
  Dlock next({"run", "--redis", url_, "--fair", "--wait", "20s", "job", "--", "touch", second});
  ASSERT_TRUE(queued(2)) << next.err();
  absl::StatusOr<Reply> tickets = server_->Command({"HGETALL", "dlock:{job}:queue"});
  ASSERT_THAT(tickets, IsOk());
  // The waiter ids, in ticket order (values are "ticket:expiry").
  std::vector<std::pair<int64_t, std::string>> order;
  for (size_t k = 0; k + 1 < tickets->elements.size(); k += 2) {
    if (tickets->elements[k].str == "#next") continue;
    int64_t t = 0;
    ASSERT_TRUE(absl::SimpleAtoi(
        tickets->elements[k + 1].str.substr(0, tickets->elements[k + 1].str.find(':')), &t));
    order.emplace_back(t, tickets->elements[k].str);
  }
  ASSERT_EQ(order.size(), 2u);
  std::sort(order.begin(), order.end());
  Dlock status({"status", "--redis", url_, "job"});
  EXPECT_EQ(status.Wait(), 0) << status.err();
  const std::string out = status.out();
  EXPECT_THAT(out, HasSubstr("fair queue: 2 waiting: 1. "));
  const size_t one = out.find(absl::StrCat("1. ", order[0].second, " (expires in "));
  const size_t two = out.find(absl::StrCat("2. ", order[1].second, " (expires in "));
  EXPECT_NE(one, std::string::npos) << out;
  EXPECT_NE(two, std::string::npos) << out;
  EXPECT_LT(one, two) << out;
  // Each entry's remaining expiry: live, and within the queue TTL (3 s,
  // FairLockOptions::queue_ttl), which the waiters keep refreshing.
  for (const auto& w : order) {
    const std::string head = absl::StrCat(w.second, " (expires in ");
    const size_t at = out.find(head);
    ASSERT_NE(at, std::string::npos) << out;
    const size_t end = out.find(')', at + head.size());
    ASSERT_NE(end, std::string::npos) << out;
    absl::Duration left;
    ASSERT_TRUE(absl::ParseDuration(out.substr(at + head.size(), end - at - head.size()), &left))
        << out;
    EXPECT_GT(left, absl::ZeroDuration()) << out;
    EXPECT_LE(left, absl::Seconds(3)) << out;
  }
  EXPECT_THAT(out, HasSubstr("state: held")) << out;
  // Let the holder finish: both waiters run in turn, the queue empties.
  int fd = open(go.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(holder.Wait(), 0) << holder.err();
  EXPECT_EQ(first.Wait(), 0) << first.err();
  EXPECT_EQ(next.Wait(), 0) << next.err();
  EXPECT_TRUE(FileExists(second));
  Dlock after({"status", "--redis", url_, "job"});
  EXPECT_EQ(after.Wait(), 0) << after.err();
  EXPECT_THAT(after.out(), Not(HasSubstr("fair queue"))) << after.out();
  EXPECT_THAT(after.out(), HasSubstr("state: free")) << after.out();
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
      {{"run", "--fair", "--redis", "redis://a:1", "--redis", "redis://b:1", "r", "--",
        "true"},
       "--fair"},
      {{"run", "--fair", "--min-replicas", "1", "r", "--", "true"}, "--min-replicas"},
      {{"run", "--permits", "2", "--min-replicas", "1", "r", "--", "true"}, "--min-replicas"},
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
  ASSERT_THAT(server_->Command({"SET", "dlock:fence-hwm", "5"}), IsOk());  // the server's mark
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
  EXPECT_THAT(ok.out(), HasSubstr("result: OK"));
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
  EXPECT_THAT(d.err(), HasSubstr("acquire write \"job\": OK"));
  EXPECT_THAT(d.err(), HasSubstr("renewal \"job\": OK"));
  EXPECT_THAT(d.err(), HasSubstr("release write \"job\": OK"));
}

TEST_F(DlockCliTest, PasswordComesFromTheEnvironment) {
  absl::StatusOr<std::unique_ptr<RedisServer>> secured =
      RedisServer::Start({.password = "s3cret"});
  ASSERT_THAT(secured, IsOk());
  const std::string url = absl::StrCat("redis://127.0.0.1:", (*secured)->port());
  Dlock without({"run", "--redis", url, "--timeout", "500ms", "job", "--", "true"},
                {"DLOCK_REDIS_PASSWORD="});
  EXPECT_EQ(without.Wait(), 77) << without.err();  // NOAUTH: permanent, fix the credentials
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

// --- The command's whole process group (issue 11, defect 1) ---------------

// A script whose background grandchild writes its pid to `pid_file`; the
// script then waits for it. `prelude` runs first (e.g. a trap).
std::vector<std::string> ScriptWithGrandchild(const std::string& pid_file,
                                              const std::string& prelude = "") {
  return {"sh", "-c",
          absl::StrCat(prelude, "sleep 60 & echo $! > ", pid_file, ".tmp; mv ", pid_file,
                       ".tmp ", pid_file, "; wait")};
}

TEST_F(DlockCliTest, LostLockStopsTheWholeProcessGroupBeforeDlockExits) {
  const std::string pid_file = Path("grandchild");
  std::vector<std::string> args = {"run", "--redis", url_, "--ttl", "2s", "job", "--"};
  for (const std::string& a : ScriptWithGrandchild(pid_file)) args.push_back(a);
  Dlock d(args);
  const pid_t grandchild = ReadPid(pid_file);
  ASSERT_GT(grandchild, 0) << d.err();
  ASSERT_THAT(server_->Command({"DEL", "dlock:{job}"}), IsOk());
  EXPECT_EQ(d.Wait(), kExitLost) << d.err();
  // dlock has exited: the grandchild must already be gone, not merely
  // signalled.
  EXPECT_TRUE(ProcessGone(grandchild)) << "grandchild " << grandchild << " survived";
  if (!ProcessGone(grandchild)) kill(grandchild, SIGKILL);
}

TEST_F(DlockCliTest, SigtermToDlockStopsTheWholeProcessGroup) {
  const std::string pid_file = Path("grandchild");
  std::vector<std::string> args = {"run", "--redis", url_, "job", "--"};
  for (const std::string& a : ScriptWithGrandchild(pid_file)) args.push_back(a);
  Dlock d(args);
  const pid_t grandchild = ReadPid(pid_file);
  ASSERT_GT(grandchild, 0) << d.err();
  kill(d.pid(), SIGTERM);
  EXPECT_EQ(d.Wait(), 128 + SIGTERM) << d.err();
  EXPECT_TRUE(ProcessGone(grandchild)) << "grandchild " << grandchild << " survived";
  if (!ProcessGone(grandchild)) kill(grandchild, SIGKILL);
  absl::StatusOr<Reply> key = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->integer, 0);  // released after the group was gone
}

TEST_F(DlockCliTest, SigkillToDlockStopsTheGroupBeforeTheLeaseCanExpire) {
  // The grandchild ignores SIGTERM (inherited), so only the SIGKILL that
  // dlock's watcher sends before the lease's deadline stops it; --kill-after
  // is far longer than the TTL, so the watcher must use the lease's bound.
  const std::string pid_file = Path("grandchild");
  std::vector<std::string> args = {"run", "--redis", url_, "--ttl", "3s",
                                   "--kill-after", "10m", "job", "--"};
  for (const std::string& a : ScriptWithGrandchild(pid_file, "trap '' TERM; ")) {
    args.push_back(a);
  }
  Dlock d(args);
  const pid_t grandchild = ReadPid(pid_file);
  ASSERT_GT(grandchild, 0) << d.err();
  kill(d.pid(), SIGKILL);
  EXPECT_EQ(d.Wait(), 128 + SIGKILL);
  // Poll (bounded) until the grandchild is gone or the key expired; it must
  // be gone while the key -- the lease nobody renews any more -- still
  // exists. The grandchild is checked before the key in each round.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool gone = false, key_alive_after = false;
  while (absl::Now() < deadline) {
    gone = ProcessGone(grandchild);
    absl::StatusOr<Reply> key = server_->Command({"EXISTS", "dlock:{job}"});
    ASSERT_THAT(key, IsOk());
    if (gone) {
      key_alive_after = key->integer == 1;
      break;
    }
    if (key->integer == 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " outlived the lease";
  EXPECT_TRUE(key_alive_after) << "the lease expired before the grandchild was gone";
  if (!ProcessGone(grandchild)) kill(grandchild, SIGKILL);
}

TEST_F(DlockCliTest, LockIsHeldUntilTheWholeGroupHasExited) {
  // The direct child exits at once; its background job finishes later and
  // still runs under the lock: dlock releases only after it.
  const std::string done = Path("done");
  Dlock d({"run", "--redis", url_, "job", "--", "sh", "-c",
           absl::StrCat("(sleep 0.3; touch ", done, ") & exit 0")});
  EXPECT_EQ(d.Wait(), 0) << d.err();
  EXPECT_TRUE(FileExists(done));
}

TEST_F(DlockCliTest, HelpSaysTheWholeProcessGroupIsSignalled) {
  Dlock d({"--help"});
  EXPECT_EQ(d.Wait(), 0);
  EXPECT_THAT(d.out(), HasSubstr("process group"));
  EXPECT_THAT(d.out(), HasSubstr("77 permission denied"));
}

// Runs `dlock run job -- sh -c 'read line; echo "$line" > got'` on a new
// pty that is the controlling terminal of a new session, types a line, and
// returns dlock's exit code (-1 if it hung). `leader`: dlock leads the
// session's foreground process group (a job of an interactive shell);
// otherwise it is a member of its parent's group (a command in a script).
void RunReadingTheTerminal(const std::string& url, const std::string& got,
                           const std::string& err, bool leader, int* code) {
  // dlock in the foreground of a terminal (a pty whose foreground process
  // group is dlock's, as an interactive shell sets it up): the command's own
  // process group must get the terminal, or its first read stops it with
  // SIGTTIN and the run hangs.
  *code = -2;
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  std::vector<std::string> argv = {Dlock::Binary(), "run", "--redis", url, "job", "--",
                                   "sh", "-c", absl::StrCat("read line; echo \"$line\" > ", got)};
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    // A new session; opening the pty makes it the controlling terminal,
    // with this process's group in the foreground.
    setsid();
    int tty = open(slave.c_str(), O_RDWR);
    if (tty < 0) _exit(120);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(tty, 0);
    dup2(tty, 1);
    dup2(e, 2);
    if (!leader) {
      // dlock in this process's group, which keeps the terminal.
      pid_t inner = fork();
      if (inner == 0) {
        execv(cargv[0], cargv.data());
        _exit(121);
      }
      int st = 0;
      if (inner < 0 || waitpid(inner, &st, 0) != inner) _exit(122);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    execv(cargv[0], cargv.data());
    _exit(121);
  }
  ASSERT_GT(pid, 0);
  const char kLine[] = "hello\n";
  ASSERT_EQ(write(master, kLine, sizeof(kLine) - 1), static_cast<ssize_t>(sizeof(kLine) - 1));
  // Bounded wait for dlock's exit; the pty's output is drained meanwhile.
  *code = -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (absl::Now() < deadline) {
    char buf[256];
    fcntl(master, F_SETFL, O_NONBLOCK);
    while (read(master, buf, sizeof(buf)) > 0) {
    }
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      *code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (*code == -1) {
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
  }
  close(master);
}

TEST_F(DlockCliTest, CommandCanReadTheTerminalWhenDlockRunsInTheForeground) {
  const std::string got = Path("got"), err = Path("err");
  int code = -2;
  RunReadingTheTerminal(url_, got, err, /*leader=*/true, &code);
  EXPECT_EQ(code, 0) << ReadFile(err);
  EXPECT_EQ(ReadFile(got), "hello\n");
}

TEST_F(DlockCliTest, CommandCanReadTheTerminalWhenDlockRunsInAScript) {
  // dlock keeps the terminal for its own group (a ^C still reaches the
  // script) and hands it over when the command stops on SIGTTIN.
  const std::string got = Path("got"), err = Path("err");
  int code = -2;
  RunReadingTheTerminal(url_, got, err, /*leader=*/false, &code);
  EXPECT_EQ(code, 0) << ReadFile(err);
  EXPECT_EQ(ReadFile(got), "hello\n");
}

TEST_F(DlockCliTest, SigintToDlockEndsItBySigintAfterCleanup) {
  // A ^C to a script's process group reaches dlock: it forwards it, waits
  // for the command's group, releases, and then dies of SIGINT itself, so
  // the calling shell script stops as it would for any interrupted command.
  const std::string started = Path("started");
  Dlock d({"run", "--redis", url_, "job", "--", "sh", "-c",
           absl::StrCat("touch ", started, "; exec sleep 30")});
  ASSERT_TRUE(WaitForFile(started)) << d.err();
  kill(d.pid(), SIGINT);
  EXPECT_EQ(d.Wait(), 128 + SIGINT) << d.err();
  EXPECT_TRUE(d.signaled());
  absl::StatusOr<Reply> key = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(key->integer, 0);  // released before dying
}

// --- Closed standard descriptors (issue 11, defect 5) ---------------------

TEST_F(DlockCliTest, ClosedStandardDescriptorsAreTolerated) {
  const std::vector<std::vector<int>> closed_sets = {{0}, {1}, {2}, {0, 1}};
  for (const std::vector<int>& closed : closed_sets) {
    std::string which;
    for (int fd : closed) absl::StrAppend(&which, fd, " ");
    const std::string marker = Path(absl::StrCat("ran", closed.size(), closed[0]));
    Dlock run({"run", "--redis", url_, "job", "--", "touch", marker}, {}, closed);
    EXPECT_EQ(run.Wait(), 0) << "run with closed " << which << run.err();
    EXPECT_TRUE(FileExists(marker)) << "run with closed " << which;
    Dlock status({"status", "--redis", url_, "job"}, {}, closed);
    EXPECT_EQ(status.Wait(), 0) << "status with closed " << which << status.err();
    Dlock check({"check", "--redis", url_}, {}, closed);
    EXPECT_EQ(check.Wait(), 0) << "check with closed " << which << check.err();
  }
}

// --- Usage errors a user can act on ---------------------------------------

TEST_F(DlockCliTest, AclUserWithoutPasswordIsAUsageError) {
  for (const char* sub : {"run", "status", "check", "unlock"}) {
    std::vector<std::string> args = {sub, "--redis",
                                     absl::StrCat("redis://alice@127.0.0.1:", server_->port())};
    if (std::string(sub) == "run") {
      args.insert(args.end(), {"job", "--", "true"});
    } else if (std::string(sub) != "check") {
      args.push_back("job");
    }
    Dlock d(args, {"DLOCK_REDIS_PASSWORD="});
    EXPECT_EQ(d.Wait(), kExitUsage) << sub << ": " << d.err();
    EXPECT_THAT(d.err(), HasSubstr("needs a password")) << sub;
  }
}

// --- dlock unlock ---------------------------------------------------------

// Starts `dlock run ARGS... RESOURCE -- sh -c "touch <started>; exec sleep
// 60"`, waits until the command runs (it holds), then SIGKILLs dlock: a
// holder that died, its lease left for the TTL it asked for.
void HoldThenDie(const std::vector<std::string>& args, const std::string& resource,
                 const std::string& started) {
  std::vector<std::string> argv = args;
  argv.insert(argv.end(), {resource, "--", "sh", "-c",
                           absl::StrCat("touch ", started, "; exec sleep 60")});
  Dlock holder(argv);
  ASSERT_TRUE(WaitForFile(started)) << holder.err();
  kill(holder.pid(), SIGKILL);
  ASSERT_EQ(holder.Wait(), 128 + SIGKILL);
}

// Waits (bounded) until `d` says on stderr that it is waiting for the lock.
void WaitUntilWaiting(Dlock& d) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline && d.err().find("waiting up to") == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(10));  // an external process's progress
  }
  ASSERT_THAT(d.err(), HasSubstr("waiting up to"));
}

TEST_F(DlockCliTest, UnlockOfAFreeLockSaysSo) {
  Dlock d({"unlock", "--redis", url_, "job"});
  EXPECT_EQ(d.Wait(), 0) << d.err();
  EXPECT_THAT(d.out(), HasSubstr("free"));
  Dlock forced({"unlock", "--force", "--redis", url_, "job"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("free"));
}

// The integer right after the first `marker` in `text` (-1 if none).
int64_t NumberAfter(const std::string& text, absl::string_view marker) {
  const size_t at = text.find(std::string(marker));
  if (at == std::string::npos) return -1;
  size_t end = at + marker.size();
  while (end < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[end]))) ++end;
  int64_t n = -1;
  if (!absl::SimpleAtoi(text.substr(at + marker.size(), end - at - marker.size()), &n)) return -1;
  return n;
}

TEST_F(DlockCliTest, UnlockForceRemovesADeadHoldersKeyBumpsTheFenceAndWakesAWaiter) {
  // A holder with a long TTL is SIGKILLed: its key stays for an hour.
  HoldThenDie({"run", "--redis", url_, "--ttl", "1h"}, "job", Path("started"));
  absl::StatusOr<Reply> token = server_->Command({"GET", "dlock:{job}"});
  ASSERT_THAT(token, IsOk());
  ASSERT_TRUE(token->is_string());
  ASSERT_GT(token->str.size(), 8u);

  // A waiter queues for it (the unlock must wake it).
  const std::string fence_file = Path("fence");
  Dlock waiter({"run", "--redis", url_, "--wait", "60s", "job", "--", "sh", "-c",
                absl::StrCat("echo $DLOCK_FENCE > ", fence_file)});
  WaitUntilWaiting(waiter);
  // Without --force: shows the holder and refuses.
  Dlock refused({"unlock", "--redis", url_, "job"});
  EXPECT_EQ(refused.Wait(), kExitUsage) << refused.err();
  EXPECT_THAT(refused.out(), HasSubstr(token->str.substr(0, 8)));
  EXPECT_THAT(refused.out(), Not(HasSubstr(token->str)));
  // "fence N" is the server's fence mark: at least the holder's fence (1),
  // and above it once the waiter's refused attempts have raised it (an
  // exclusive acquire is a transaction whose INCR runs even when its SET is
  // refused; fences only rise).
  const int64_t shown = NumberAfter(refused.out(), "fence ");
  EXPECT_GE(shown, 1) << refused.out();
  EXPECT_THAT(refused.out(), HasSubstr("expires in"));
  EXPECT_THAT(refused.err(), HasSubstr("--force"));
  absl::StatusOr<Reply> still = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(still, IsOk());
  EXPECT_EQ(still->integer, 1);

  Dlock forced({"unlock", "--force", "--redis", url_, "job"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("removed"));
  const int64_t bumped = NumberAfter(forced.out(), "fence now ");
  EXPECT_GT(bumped, shown) << forced.out();
  // The waiter gets the lock with a fence above the one the unlock burned.
  EXPECT_EQ(waiter.Wait(), 0) << waiter.err();
  int64_t got = -1;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(fence_file)), &got))
      << ReadFile(fence_file);
  EXPECT_GT(got, bumped);
}

TEST_F(DlockCliTest, UnlockForceRemovesAReentrantHashButNotForeignData) {
  ASSERT_THAT(server_->Command({"HSET", "dlock:{job}", "owner-a", "2"}), IsOk());
  ASSERT_THAT(server_->Command({"PEXPIRE", "dlock:{job}", "600000"}), IsOk());
  Dlock forced({"unlock", "--force", "--redis", url_, "job"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("removed"));
  absl::StatusOr<Reply> gone = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(gone, IsOk());
  EXPECT_EQ(gone->integer, 0);

  ASSERT_THAT(server_->Command({"RPUSH", "dlock:{job}", "x"}), IsOk());
  Dlock foreign({"unlock", "--force", "--redis", url_, "job"});
  EXPECT_EQ(foreign.Wait(), kExitInternal) << foreign.err();
  EXPECT_THAT(foreign.out(), HasSubstr("foreign data"));
  absl::StatusOr<Reply> kept = server_->Command({"EXISTS", "dlock:{job}"});
  ASSERT_THAT(kept, IsOk());
  EXPECT_EQ(kept->integer, 1);
}

// --force clears a semaphore's permits (issue 16): two holders of a
// 2-permit semaphore die with an hour's TTL and a third run waits. Without
// --force the permits are shown and kept; with it they are gone, the fence
// is bumped past theirs and the waiting run goes ahead.
TEST_F(DlockCliTest, UnlockForceRemovesEveryPermitOfASemaphore) {
  for (int i = 0; i < 2; ++i) {
    HoldThenDie({"run", "--redis", url_, "--permits", "2", "--ttl", "1h"}, "pool",
                Path(absl::StrCat("started", i)));
  }
  const std::string fence_file = Path("fence");
  Dlock waiter({"run", "--redis", url_, "--permits", "2", "--wait", "60s", "pool", "--", "sh",
                "-c", absl::StrCat("echo $DLOCK_FENCE > ", fence_file)});
  WaitUntilWaiting(waiter);

  Dlock refused({"unlock", "--redis", url_, "pool"});
  EXPECT_EQ(refused.Wait(), kExitUsage) << refused.err();
  EXPECT_THAT(refused.out(), HasSubstr("semaphore, 2 permits held, fence 2"));
  absl::StatusOr<Reply> kept = server_->Command({"ZCARD", "dlock:{pool}"});
  ASSERT_THAT(kept, IsOk());
  EXPECT_EQ(kept->integer, 2);

  Dlock forced({"unlock", "--force", "--redis", url_, "pool"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("removed semaphore, 2 permits"));
  EXPECT_THAT(forced.out(), HasSubstr("fence now 3"));
  EXPECT_EQ(waiter.Wait(), 0) << waiter.err();
  EXPECT_EQ(ReadFile(fence_file), "4\n");
}

// --force clears a read-write lock's readers and a waiting writer's intent:
// a --shared run dies with an hour's TTL; an exclusive run waits behind it
// (its intent marker keeps new readers out). Without --force both are shown
// and kept; with it both are gone and the writer runs.
TEST_F(DlockCliTest, UnlockForceRemovesReadersAndAWaitingWritersIntent) {
  HoldThenDie({"run", "--redis", url_, "--shared", "--ttl", "1h"}, "cfg", Path("started"));
  const std::string ran = Path("ran");
  Dlock writer({"run", "--redis", url_, "--wait", "60s", "cfg", "--", "touch", ran});
  WaitUntilWaiting(writer);
  auto exists = [&](const std::string& key) {
    absl::StatusOr<Reply> r = server_->Command({"EXISTS", key});
    return r.ok() && r->integer == 1;
  };
  for (int i = 0; i < 500 && !exists("dlock:{cfg}:writer-waiting"); ++i) {
    usleep(10000);  // until the waiting writer's attempt set its marker, bounded
  }
  ASSERT_TRUE(exists("dlock:{cfg}:writer-waiting"));

  Dlock refused({"unlock", "--redis", url_, "cfg"});
  EXPECT_EQ(refused.Wait(), kExitUsage) << refused.err();
  EXPECT_THAT(refused.out(), HasSubstr("1 reader (shared)"));
  EXPECT_THAT(refused.out(), HasSubstr("a writer is waiting"));
  EXPECT_TRUE(exists("dlock:{cfg}:readers"));
  EXPECT_FALSE(FileExists(ran));

  Dlock forced({"unlock", "--force", "--redis", url_, "cfg"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("removed 1 reader; a waiting writer's intent marker"));
  EXPECT_THAT(forced.out(), HasSubstr("fence now "));
  EXPECT_EQ(writer.Wait(), 0) << writer.err();
  EXPECT_TRUE(FileExists(ran));
  EXPECT_FALSE(exists("dlock:{cfg}:readers"));
}

// --force clears the fair queue: a --fair holder dies with an hour's TTL,
// a dead waiter's entry (a FairLock with a long queue ttl that crashed)
// stands first in line, and a live --fair run waits behind both. Without
// --force all of it is shown and kept; with it the lock and the queue are
// gone, every waiter is woken, and the live one takes the lock.
TEST_F(DlockCliTest, UnlockForceClearsTheFairQueueAndWakesTheLiveWaiter) {
  HoldThenDie({"run", "--redis", url_, "--fair", "--ttl", "1h"}, "line", Path("started"));
  absl::StatusOr<Reply> t = server_->Command({"TIME"});
  ASSERT_THAT(t, IsOk());
  int64_t now_s = 0;
  ASSERT_TRUE(absl::SimpleAtoi(t->elements[0].str, &now_s));
  ASSERT_THAT(server_->Command({"HSET", "dlock:{line}:queue", "#next", "1", "gone:1",
                                absl::StrCat("1:", (now_s + 3600) * 1000)}),
              IsOk());
  const std::string ran = Path("ran");
  Dlock live({"run", "--redis", url_, "--fair", "--wait", "60s", "line", "--", "touch", ran});
  ASSERT_TRUE(FairWaiters("line", 2)) << live.err();

  Dlock refused({"unlock", "--redis", url_, "line"});
  EXPECT_EQ(refused.Wait(), kExitUsage) << refused.err();
  EXPECT_THAT(refused.out(), HasSubstr("fair queue: 2 waiting: 1. gone:1"));
  EXPECT_TRUE(FairWaiters("line", 2));
  EXPECT_FALSE(FileExists(ran));

  Dlock forced({"unlock", "--force", "--redis", url_, "line"});
  EXPECT_EQ(forced.Wait(), 0) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("the fair queue (2 waiters, woken to queue again)"));
  EXPECT_THAT(forced.out(), HasSubstr("fence now 2"));
  EXPECT_EQ(live.Wait(), 0) << live.err();
  EXPECT_TRUE(FileExists(ran));
  absl::StatusOr<Reply> dead = server_->Command({"HEXISTS", "dlock:{line}:queue", "gone:1"});
  ASSERT_THAT(dead, IsOk());
  EXPECT_EQ(dead->integer, 0);
}

// Foreign data at a side key (not the lock key) is left alone and reported;
// the rest is removed.
TEST_F(DlockCliTest, UnlockForceLeavesForeignDataAtASideKeyAndSaysSo) {
  ASSERT_THAT(server_->Command({"SET", "dlock:{job}", "tokA", "PX", "600000"}), IsOk());
  ASSERT_THAT(server_->Command({"RPUSH", "dlock:{job}:readers", "x"}), IsOk());
  Dlock forced({"unlock", "--force", "--redis", url_, "job"});
  EXPECT_EQ(forced.Wait(), kExitInternal) << forced.err();
  EXPECT_THAT(forced.out(), HasSubstr("dlock:{job}:readers holds a list (foreign data)"));
  EXPECT_THAT(forced.out(), HasSubstr("removed held"));
  absl::StatusOr<Reply> lock = server_->Command({"EXISTS", "dlock:{job}", "dlock:{job}:readers"});
  ASSERT_THAT(lock, IsOk());
  EXPECT_EQ(lock->integer, 1);  // only the list is left
}

// --- dlock check: same instance twice, PUBLISH permission -----------------

TEST_F(DlockCliTest, CheckFlagsTheSameInstanceListedTwice) {
  const std::string p = absl::StrCat(server_->port());
  const std::vector<std::vector<std::string>> configs = {
      {"--redis", url_, "--redis", url_},
      {"--redis", absl::StrCat("redis://127.0.0.1:", p), "--redis",
       absl::StrCat("redis://localhost:", p)},
      {"--redis", absl::StrCat("redis://127.0.0.1:", p, "/0"), "--redis",
       absl::StrCat("redis://127.0.0.1:", p, "/1"), "--redis",
       absl::StrCat("redis://127.0.0.1:", p, "/2")},
  };
  for (const std::vector<std::string>& redis : configs) {
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), redis.begin(), redis.end());
    Dlock d(args);
    EXPECT_EQ(d.Wait(), kExitUnsafe) << d.out() << d.err();
    EXPECT_THAT(d.err(), HasSubstr("same Redis instance"));
    EXPECT_THAT(d.err(), HasSubstr(redis[3].substr(8)));  // as displayed
  }
}

TEST_F(DlockCliTest, CheckWarnsWhenTheUserCannotPublishReleaseNotifications) {
  ASSERT_THAT(server_->Command({"ACL", "SETUSER", "nopub", "on", ">pw", "~*", "+@all",
                               "resetchannels"}),
              IsOk());
  const std::string url = absl::StrCat("redis://nopub:pw@127.0.0.1:", server_->port());
  Dlock d({"check", "--redis", url});
  EXPECT_EQ(d.Wait(), 0) << d.out() << d.err();
  EXPECT_THAT(d.out(), HasSubstr("PUBLISH on the release channels refused"));
  EXPECT_THAT(d.out(), HasSubstr("SUBSCRIBE to the release channels failed"));
  EXPECT_THAT(d.out(), HasSubstr("backoff"));
  Dlock strict({"check", "--strict", "--redis", url});
  EXPECT_EQ(strict.Wait(), kExitUnsafe) << strict.out();

  Dlock ok({"check", "--redis", url_});
  EXPECT_EQ(ok.Wait(), 0) << ok.out();
  EXPECT_THAT(ok.out(), HasSubstr("PUBLISH on the release channels: allowed"));
  EXPECT_THAT(ok.out(), HasSubstr("SUBSCRIBE to the release channels: allowed"));
  EXPECT_THAT(ok.out(), Not(HasSubstr("backoff")));
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

TEST_F(DlockCliRedLockTest, UnlockForceReportsEveryServer) {
  for (RedisServer* s : {server_.get(), more_[0].get(), more_[1].get()}) {
    ASSERT_THAT(s->Command({"SET", "dlock:{job}", "0123456789abcdef", "PX", "600000"}), IsOk());
  }
  std::vector<std::string> args = {"unlock", "--force"};
  for (const std::string& a : RedisFlags()) args.push_back(a);
  args.push_back("job");
  Dlock d(args);
  EXPECT_EQ(d.Wait(), 0) << d.err();
  for (RedisServer* s : {server_.get(), more_[0].get(), more_[1].get()}) {
    EXPECT_THAT(d.out(), HasSubstr(absl::StrCat("127.0.0.1:", s->port(), ": removed")));
    absl::StatusOr<Reply> key = s->Command({"EXISTS", "dlock:{job}"});
    ASSERT_THAT(key, IsOk());
    EXPECT_EQ(key->integer, 0);
  }
}

// `dlock run --permits N`: N+1 runs of one resource, at most N commands at
// once. Each command marks itself inside (a file named after its pid),
// appends how many are inside when it enters, and stays until the test
// creates the "go" marker. The test only reads those files and dlock's
// output (bounded polling), never sleeps to let something happen.
TEST_F(DlockCliTest, PermitsLetAtMostNCommandsRunAtOnce) {
  constexpr int kPermits = 2;
  const std::string dir = Path("inside");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string go = Path("go"), counts = Path("counts");
  const std::string script = absl::StrCat(
      "touch ", dir, "/$$; ls ", dir, " | wc -l >> ", counts, "; while [ ! -e ", go,
      " ]; do sleep 0.02; done; rm ", dir, "/$$");
  std::vector<std::unique_ptr<Dlock>> runs;
  for (int i = 0; i <= kPermits; ++i) {
    runs.push_back(std::make_unique<Dlock>(std::vector<std::string>{
        "run", "--redis", url_, "--permits", absl::StrCat(kPermits), "--wait", "60s",
        "--ttl", "2s", "pool", "--", "sh", "-c", script}));
  }
  auto entered = [&]() {
    std::vector<std::string> lines = absl::StrSplit(ReadFile(counts), '\n', absl::SkipEmpty());
    return lines.size();
  };
  auto waiting = [&]() {
    int n = 0;
    for (auto& r : runs) n += r->err().find("waiting up to") != std::string::npos ? 1 : 0;
    return n;
  };
  // Two commands get in; the third run says it waits.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((entered() < kPermits || waiting() < 1) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // polling the markers, bounded
  }
  ASSERT_EQ(entered(), static_cast<size_t>(kPermits)) << ReadFile(counts);
  ASSERT_EQ(waiting(), 1);
  // `dlock status` lists the two holders.
  Dlock status({"status", "--redis", url_, "pool"});
  ASSERT_EQ(status.Wait(), 0) << status.err();
  EXPECT_THAT(status.out(), HasSubstr("semaphore, 2 permits held"));
  EXPECT_THAT(status.out(), HasSubstr("state: held"));
  // Renewals keep the two permits past their 2 s ttl: wait (bounded) until
  // both were renewed, i.e. both expiries moved; the third still waits.
  auto expiries = [&]() {
    absl::StatusOr<Reply> z =
        server_->Command({"ZRANGE", "dlock:{pool}", "0", "-1", "WITHSCORES"});
    std::vector<std::string> out;
    if (z.ok() && z->is_array()) {
      for (size_t i = 1; i < z->elements.size(); i += 2) out.push_back(z->elements[i].str);
    }
    return out;
  };
  const std::vector<std::string> first = expiries();
  ASSERT_EQ(first.size(), static_cast<size_t>(kPermits));
  const absl::Time renew_deadline = absl::Now() + absl::Seconds(10);
  std::vector<std::string> now = first;
  while ((now[0] == first[0] || now[1] == first[1] || now[0] == first[1]) &&
         absl::Now() < renew_deadline) {
    absl::SleepFor(absl::Milliseconds(50));  // polling the server, bounded
    now = expiries();
    ASSERT_EQ(now.size(), static_cast<size_t>(kPermits));
  }
  EXPECT_EQ(entered(), static_cast<size_t>(kPermits)) << ReadFile(counts);
  std::ofstream(go).put('\n');
  for (auto& r : runs) EXPECT_EQ(r->Wait(absl::Seconds(30)), 0) << r->err();
  std::vector<std::string> lines = absl::StrSplit(ReadFile(counts), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kPermits + 1));
  for (const std::string& line : lines) {
    int n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &n)) << line;
    EXPECT_LE(n, kPermits) << ReadFile(counts);
  }
  // Every permit was given back.
  absl::StatusOr<Reply> left = server_->Command({"EXISTS", "dlock:{pool}"});
  ASSERT_THAT(left, IsOk());
  EXPECT_EQ(left->integer, 0);
}

TEST_F(DlockCliTest, PermitsUsageErrorsAndForeignData) {
  Dlock zero({"run", "--redis", url_, "--permits", "0", "r", "--", "true"});
  EXPECT_EQ(zero.Wait(), kExitUsage) << zero.err();
  EXPECT_THAT(zero.err(), HasSubstr("--permits"));
  Dlock two({"run", "--redis", url_, "--redis", url_, "--permits", "2", "r", "--", "true"});
  EXPECT_EQ(two.Wait(), kExitUsage) << two.err();
  EXPECT_THAT(two.err(), HasSubstr("one --redis"));
  // A mutex and a semaphore of one name: the key holds foreign data.
  ASSERT_THAT(server_->Command({"SET", "dlock:{r}", "tok", "PX", "60000"}), IsOk());
  Dlock foreign({"run", "--redis", url_, "--permits", "2", "r", "--", "true"});
  EXPECT_EQ(foreign.Wait(), kExitInternal) << foreign.err();
  EXPECT_THAT(foreign.err(), HasSubstr("foreign"));
}

}  // namespace

// Issue 11, defect 2 as a CLI user meets it: 3 servers without persistence;
// a first `dlock run` holds the lock; two of the servers are killed and
// restarted empty; a brand-new `dlock run` (which never saw the old run_ids)
// must not get the quorum while the first still runs: the restarted servers'
// data sets are young (--restart-window, 60 s) and refuse.
TEST_F(DlockCliRedLockTest, AFreshRunCannotTakeALockHeldAcrossRestartsWithoutPersistence) {
  const std::string started = Path("started");
  const std::string second = Path("second");
  std::vector<std::string> first_args = {"run"};
  for (const std::string& a : RedisFlags()) first_args.push_back(a);
  first_args.insert(first_args.end(), {"--ttl", "9s", "r", "--", "sh", "-c",
                                       absl::StrCat("echo $DLOCK_FENCE > ", started,
                                                    "; sleep 30")});
  Dlock first(first_args);
  ASSERT_TRUE(WaitForFile(started)) << first.err();
  for (auto& s : more_) {
    ASSERT_THAT(s->Kill(), IsOk());
    ASSERT_THAT(s->Restart(), IsOk());
  }
  std::vector<std::string> second_args = {"run"};
  for (const std::string& a : RedisFlags()) second_args.push_back(a);
  second_args.insert(second_args.end(),
                     {"r", "--", "sh", "-c", absl::StrCat("echo $DLOCK_FENCE > ", second)});
  Dlock fresh(second_args);
  EXPECT_EQ(fresh.Wait(), kExitBusy) << fresh.err();
  EXPECT_FALSE(FileExists(second)) << "a second holder ran: " << ReadFile(second);
  EXPECT_THAT(fresh.err(), HasSubstr("young"));
  kill(first.pid(), SIGTERM);
  first.Wait();
}

// The window is one deployment-wide setting: a lease may not outlive it.
TEST_F(DlockCliRedLockTest, TtlAboveTheRestartWindowIsAUsageError) {
  std::vector<std::string> args = {"run"};
  for (const std::string& a : RedisFlags()) args.push_back(a);
  args.insert(args.end(), {"--ttl", "2m", "r", "--", "true"});
  Dlock d(args);
  EXPECT_EQ(d.Wait(), kExitUsage) << d.err();
  EXPECT_THAT(d.err(), HasSubstr("exceeds --restart-window 1m"));
  args.insert(args.begin() + 1, {"--restart-window", "5m"});
  Dlock wider(args);
  EXPECT_EQ(wider.Wait(), 0) << wider.err();
}

// `dlock trust`: a restarted (young) server is shown with the time it
// refuses for; without --force nothing changes (exit 64); with --force it is
// trusted and a single-server run with --restart-window takes the lock.
TEST_F(DlockCliTest, TrustShowsAYoungServerAndForceTrustsIt) {
  ASSERT_THAT(server_->Kill(), IsOk());
  ASSERT_THAT(server_->Restart(), IsOk());
  Dlock refused({"run", "--redis", url_, "--restart-window", "1m", "r", "--", "true"});
  EXPECT_EQ(refused.Wait(), kExitUnavailable) << refused.err();
  EXPECT_THAT(refused.err(), HasSubstr("young"));
  Dlock show({"trust", "--redis", url_});
  EXPECT_EQ(show.Wait(), kExitUsage) << show.err();
  EXPECT_THAT(show.out(), HasSubstr("refuses acquires for another"));
  EXPECT_THAT(show.err(), HasSubstr("--force"));
  Dlock force({"trust", "--force", "--redis", url_});
  EXPECT_EQ(force.Wait(), 0) << force.err();
  EXPECT_THAT(force.out(), HasSubstr("now trusted"));
  Dlock again({"trust", "--redis", url_});
  EXPECT_EQ(again.Wait(), 0) << again.err();
  EXPECT_THAT(again.out(), HasSubstr("trusted"));
  Dlock run({"run", "--redis", url_, "--restart-window", "1m", "r", "--", "true"});
  EXPECT_EQ(run.Wait(), 0) << run.err();
}

// RedLock over the same instance twice (here under two host names) is a
// configuration error: exit 64 naming it, not "busy". (Two listings only:
// with a third, independent server the first lease may be granted by two
// distinct instances before the duplicate's INFO is in -- a sound lease;
// the error then comes with the next operation. A quorum is never made of
// two listings of one instance: each vote's INFO is answered before it.)
TEST_F(DlockCliRedLockTest, RunOverTheSameInstanceTwiceIsAUsageError) {
  Dlock d({"run", "--redis", url_, "--redis",
           absl::StrCat("redis://localhost:", server_->port()), "r", "--", "true"});
  EXPECT_EQ(d.Wait(), kExitUsage) << d.err();
  EXPECT_THAT(d.err(), HasSubstr("same Redis instance"));
}

// --shared runs overlap: the first writes into a fifo, which blocks until
// the second -- inside its own --shared run -- opens it to read. Were the
// runs exclusive, the second would wait while the first blocks: the first
// never finishes (and the second gives up, busy).
TEST_F(DlockCliTest, TwoSharedRunsOverlap) {
  const std::string fifo = Path("fifo"), out = Path("out");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Dlock writer({"run", "--redis", url_, "--shared", "cfg", "--", "sh", "-c",
                absl::StrCat("echo both-inside > ", fifo)});
  Dlock reader({"run", "--redis", url_, "--shared", "--wait", "20s", "cfg", "--", "sh", "-c",
                absl::StrCat("cat ", fifo, " > ", out)});
  EXPECT_EQ(reader.Wait(), 0) << reader.err();
  EXPECT_EQ(writer.Wait(), 0) << writer.err();
  EXPECT_EQ(ReadFile(out), "both-inside\n");
  absl::StatusOr<Reply> left = server_->Command({"EXISTS", "dlock:{cfg}:readers"});
  ASSERT_THAT(left, IsOk());
  EXPECT_EQ(left->integer, 0);
}

// An exclusive run (no --shared) excludes --shared runs: while a --shared
// run holds (blocked reading a fifo the test controls), an exclusive run
// is busy, and a waiting one starts only after the shared run ended.
TEST_F(DlockCliTest, AnExclusiveRunExcludesSharedRuns) {
  const std::string gate = Path("gate"), started = Path("started"), log = Path("log");
  ASSERT_EQ(mkfifo(gate.c_str(), 0600), 0);
  Dlock shared({"run", "--redis", url_, "--shared", "cfg", "--", "sh", "-c",
                absl::StrCat("touch ", started, "; cat ", gate, " > /dev/null; echo shared-end >> ",
                             log)});
  ASSERT_TRUE(WaitForFile(started)) << shared.err();
  Dlock busy({"run", "--redis", url_, "cfg", "--", "touch", Path("ran")});
  EXPECT_EQ(busy.Wait(), kExitBusy) << busy.err();
  EXPECT_FALSE(FileExists(Path("ran")));
  Dlock status({"status", "--redis", url_, "cfg"});
  EXPECT_EQ(status.Wait(), 0) << status.err();
  EXPECT_THAT(status.out(), HasSubstr("1 reader (shared)"));
  EXPECT_THAT(status.out(), HasSubstr("a writer is waiting"));
  EXPECT_THAT(status.out(), HasSubstr("state: held (shared)"));
  Dlock exclusive({"run", "--redis", url_, "--wait", "20s", "cfg", "--", "sh", "-c",
                   absl::StrCat("echo exclusive >> ", log)});
  // Let the shared run finish: open the fifo for writing (its reader is
  // there) and close it.
  int fd = open(gate.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(shared.Wait(), 0) << shared.err();
  EXPECT_EQ(exclusive.Wait(), 0) << exclusive.err();
  EXPECT_EQ(ReadFile(log), "shared-end\nexclusive\n");
}

// Several RESOURCEs: all or nothing, the fences of each in DLOCK_FENCES.
TEST_F(DlockCliTest, SeveralResourcesAreTakenAllOrNothing) {
  const std::string f = Path("env");
  Dlock both({"run", "--redis", url_, "y", "x", "--", "sh", "-c",
              absl::StrCat("echo $DLOCK_RESOURCE $DLOCK_FENCES > ", f)});
  ASSERT_EQ(both.Wait(), 0) << both.err();
  // One fence mark per server (issue 23): x, then y, take its next two fences.
  EXPECT_EQ(ReadFile(f), "x,y 1 2\n");
  ASSERT_THAT(server_->Command({"SET", "dlock:{y}", "someone-else", "PX", "60000"}), IsOk());
  Dlock busy({"run", "--redis", url_, "x", "y", "--", "touch", Path("ran")});
  EXPECT_EQ(busy.Wait(), kExitBusy) << busy.err();
  EXPECT_FALSE(FileExists(Path("ran")));
  absl::StatusOr<Reply> x = server_->Command({"EXISTS", "dlock:{x}"});
  ASSERT_THAT(x, IsOk());
  EXPECT_EQ(x->integer, 0);  // x was released when y turned out busy
  Dlock dup({"run", "--redis", url_, "x", "x", "--", "true"});
  EXPECT_EQ(dup.Wait(), kExitUsage) << dup.err();
  Dlock red({"run", "--redis", url_, "--redis", url_, "--shared", "x", "--", "true"});
  EXPECT_EQ(red.Wait(), kExitUsage) << red.err();
}

// The newcomer's RedLock path (issue 25): three freshly started servers
// nobody declared trusted. Every acquire is refused for one restart window;
// the refusal and `dlock check` say how long is left and name the way out,
// `dlock trust --force --redis ...` for these servers, with when it is safe;
// the printed line, run as is, lets the next run take the lock.
class DlockCliFreshServersTest : public DlockCliTest {
 protected:
  void SetUp() override {
    DlockCliTest::SetUp();
    ::dlock::test_support::RedisServerOptions fresh;
    fresh.trusted_data_set_prefixes.clear();
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start(fresh);
      ASSERT_THAT(s, IsOk());
      urls_.push_back(absl::StrCat("redis://127.0.0.1:", (*s)->port()));
      fresh_.push_back(*std::move(s));
    }
  }
  std::vector<std::string> With(std::vector<std::string> head, std::vector<std::string> tail) {
    for (const std::string& u : urls_) head.insert(head.end(), {"--redis", u});
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  }
  // "dlock trust --force --redis <url1> --redis <url2> ..." for `urls`.
  static std::string TrustLine(const std::vector<std::string>& urls) {
    std::string line = "dlock trust --force";
    for (const std::string& u : urls) absl::StrAppend(&line, " --redis ", u);
    return line;
  }
  std::vector<std::unique_ptr<RedisServer>> fresh_;
  std::vector<std::string> urls_;
};

TEST_F(DlockCliFreshServersTest, RefusalSaysHowLongIsLeftAndNamesDlockTrust) {
  Dlock refused(With({"run"}, {"inv", "--", "echo", "ran"}));
  EXPECT_EQ(refused.Wait(), kExitUnavailable) << refused.err();
  EXPECT_THAT(refused.out(), Not(HasSubstr("ran")));
  EXPECT_THAT(refused.err(), HasSubstr("young"));
  EXPECT_THAT(refused.err(), HasSubstr("refuse acquires for about another"));
  EXPECT_THAT(refused.err(), HasSubstr(TrustLine(urls_)));
  EXPECT_THAT(refused.err(), HasSubstr("never held dlock locks"));
  EXPECT_THAT(refused.err(), HasSubstr("restart that lost data"));

  // The way out, as printed (exit 0), and the next run takes the lock.
  Dlock trust(With({"trust", "--force"}, {}));
  EXPECT_EQ(trust.Wait(), 0) << trust.err();
  Dlock ran(With({"run"}, {"inv", "--", "echo", "ran"}));
  EXPECT_EQ(ran.Wait(), 0) << ran.err();
  EXPECT_THAT(ran.out(), HasSubstr("ran"));
}

TEST_F(DlockCliFreshServersTest, CheckWarnsAboutYoungDataSetsWithTheSameAdvice) {
  // Before any acquire: no marker yet, the first acquire starts the window.
  Dlock before(With({"check"}, {}));
  EXPECT_EQ(before.Wait(), 0) << before.out() << before.err();
  EXPECT_THAT(before.out(), HasSubstr("WARN   data set: no marker"));
  // After a refused run: young, with the time left and the advice.
  Dlock refused(With({"run"}, {"inv", "--", "true"}));
  EXPECT_EQ(refused.Wait(), kExitUnavailable) << refused.err();
  Dlock check(With({"check"}, {}));
  EXPECT_EQ(check.Wait(), 0) << check.out() << check.err();
  EXPECT_THAT(check.out(), HasSubstr("young, refuses every acquire for another"));
  for (const std::string& u : urls_) {
    EXPECT_THAT(check.out(), HasSubstr(TrustLine({u})));
  }
  EXPECT_THAT(check.out(), HasSubstr("never held dlock locks"));
  // 3 persistence warnings (as before) + 3 young data sets.
  EXPECT_THAT(check.out(),
              HasSubstr("result: OK with 6 warnings (0 unsafe, 6 warnings, 0 unreachable)"));
  Dlock strict(With({"check", "--strict"}, {}));
  EXPECT_EQ(strict.Wait(), kExitUnsafe) << strict.out();
  EXPECT_THAT(strict.out(), HasSubstr("result: UNSAFE under --strict (0 unsafe, 6 warnings"));
  // Trusted: no data-set warning any more.
  Dlock trust(With({"trust", "--force"}, {}));
  EXPECT_EQ(trust.Wait(), 0) << trust.err();
  Dlock after(With({"check"}, {}));
  EXPECT_EQ(after.Wait(), 0) << after.out();
  EXPECT_THAT(after.out(), Not(HasSubstr("young")));
  EXPECT_THAT(after.out(), HasSubstr("data set: trusted"));
}

// One server: the restart rule is off unless --restart-window is given, and
// so is check's data-set finding.
TEST_F(DlockCliFreshServersTest, OneServerCheckJudgesTheDataSetOnlyWithARestartWindow) {
  Dlock plain({"check", "--redis", urls_[0]});
  EXPECT_EQ(plain.Wait(), 0) << plain.out();
  EXPECT_THAT(plain.out(), Not(HasSubstr("data set")));
  Dlock windowed({"check", "--redis", urls_[0], "--restart-window", "30s"});
  EXPECT_EQ(windowed.Wait(), 0) << windowed.out();
  EXPECT_THAT(windowed.out(), HasSubstr("WARN   data set: no marker"));
  EXPECT_THAT(windowed.out(), HasSubstr(TrustLine({urls_[0]})));
}

// A redis-sentinel:// URL: check reports the Sentinel facts, run takes the
// lock on the master and honours --min-replicas.
TEST_F(DlockCliTest, CheckAndRunOverSentinel) {
  absl::StatusOr<std::unique_ptr<::dlock::test_support::SentinelDeployment>> d =
      ::dlock::test_support::SentinelDeployment::Start();
  ASSERT_THAT(d, IsOk());
  const std::string url = (*d)->url();
  Dlock check({"check", "--redis", url});
  EXPECT_EQ(check.Wait(), 0) << check.out() << check.err();
  EXPECT_THAT(check.out(), HasSubstr("Sentinel master 'mymaster' at 127.0.0.1:"));
  EXPECT_THAT(check.out(), HasSubstr("sentinels can fail over"));
  EXPECT_THAT(check.out(), HasSubstr("2 replica(s) in sync"));
  EXPECT_THAT(check.out(), HasSubstr("min-replicas-to-write 0"));
  Dlock run({"run", "--redis", url, "--min-replicas", "2", "r", "--", "true"});
  EXPECT_EQ(run.Wait(), 0) << run.err();
  Dlock greedy({"run", "--redis", url, "--min-replicas", "3", "--min-replicas-timeout",
                "100ms", "r", "--", "true"});
  EXPECT_EQ(greedy.Wait(), 69) << greedy.err();
  EXPECT_THAT(greedy.err(), HasSubstr("replica acknowledgement"));
}

}  // namespace dlock
