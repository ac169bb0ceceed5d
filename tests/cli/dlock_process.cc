#include "dlock/tests/cli/dlock_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace dlock {
namespace cli_test {

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

bool WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (FileExists(path)) return true;
    absl::SleepFor(absl::Milliseconds(10));  // an external process writes it
  }
  return false;
}

bool WaitForText(const std::string& path, const std::string& text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ReadFile(path).find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(10));  // an external process writes it
  }
  return false;
}

std::string TestPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                      ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-",
                      name);
}

Dlock::Dlock(std::vector<std::string> args, std::vector<std::string> extra_env,
             std::vector<int> closed)
    : Dlock(std::move(args), DlockOptions{std::move(extra_env), {}, std::move(closed)}) {}

Dlock::Dlock(std::vector<std::string> args, DlockOptions options) {
  static int counter = 0;
  const std::string stem =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/dlock-", getpid(), "-", ++counter);
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
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  for (int fd : options.closed) posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const bool unset = std::any_of(
        options.unset_env.begin(), options.unset_env.end(),
        [&entry](const std::string& name) { return entry.rfind(name + "=", 0) == 0; });
    if (!unset) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), options.extra_env.begin(), options.extra_env.end());
  std::vector<char*> cenv;
  for (std::string& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  spawn_error_ = posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (spawn_error_ != 0) pid_ = -1;
}

Dlock::~Dlock() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
}

std::string Dlock::Binary() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/dlock/cli/dlock");
}

int Dlock::Wait(absl::Duration timeout) {
  if (exited_ || pid_ <= 0) return code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      signaled_ = WIFSIGNALED(st);
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return code_;
    }
    // Waiting for an external process, bounded by `deadline`.
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

Outcome RunDlock(std::vector<std::string> args, DlockOptions options, absl::Duration limit) {
  Dlock d(std::move(args), std::move(options));
  Outcome o;
  if (d.spawn_error() != 0) {
    o.err = absl::StrCat("posix_spawn: ", d.spawn_error());
    return o;
  }
  o.code = d.Wait(limit);
  if (o.code == -1) {
    kill(d.pid(), SIGKILL);  // the destructor reaps it
  }
  o.out = d.out();
  o.err = d.err();
  if (o.code == -1) o.err += "\n(timed out)";
  return o;
}

}  // namespace cli_test
}  // namespace dlock
