#include "dlock/testing/pg_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "dlock/testing/redis_process.h"
#include "postgresql/libpq-fe.h"

namespace dlock {
namespace test_support {
namespace {

// Inside the user namespace the caller (root) appears as this uid/gid, which
// /etc/passwd knows ("nobody"), so initdb can look its own user up.
constexpr int kNamespaceUid = 65534;
constexpr int kNamespaceGid = 65534;

// The newest /usr/lib/postgresql/<N>/bin holding initdb and postgres, else
// the directory of `initdb` on PATH when `postgres` sits beside it.
absl::StatusOr<std::string> FindBinDir() {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = entry.path().string() + "/bin";
    int version = std::atoi(entry.path().filename().c_str());
    if (access((bin + "/initdb").c_str(), X_OK) == 0 &&
        access((bin + "/postgres").c_str(), X_OK) == 0) {
      found.emplace_back(version, bin);
    }
  }
  if (!found.empty()) return std::max_element(found.begin(), found.end())->second;
  const char* path = std::getenv("PATH");
  if (path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':')) {
      if (dir.empty()) continue;
      std::string d(dir);
      if (access((d + "/initdb").c_str(), X_OK) == 0 &&
          access((d + "/postgres").c_str(), X_OK) == 0) {
        return d;
      }
    }
  }
  return absl::NotFoundError(
      "PostgreSQL's initdb/postgres not found in /usr/lib/postgresql/*/bin or on PATH; "
      "install the Debian package postgresql (tools/setup)");
}

// The pids whose parent is `parent` (PostgreSQL's backends and auxiliary
// processes are the postmaster's children, each in a session of its own, so
// a process-group signal would miss them).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path().string() + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces; parse after ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(std::atoi(name.c_str()));
  }
  return out;
}

// Sends `sig` to the postmaster and to every child it has.
void SignalServer(pid_t postmaster, int sig) {
  if (sig == SIGCONT) {
    for (pid_t c : ChildrenOf(postmaster)) kill(c, sig);
    kill(postmaster, sig);
    return;
  }
  // Stop/kill the postmaster first, so it starts no child after the scan.
  std::vector<pid_t> children = ChildrenOf(postmaster);
  kill(postmaster, sig);
  for (pid_t c : children) kill(c, sig);
  if (sig == SIGSTOP) {
    for (pid_t c : ChildrenOf(postmaster)) kill(c, sig);
  }
}

bool WriteFile(const char* path, const char* data) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, data, strlen(data));
  close(fd);
  return n == static_cast<ssize_t>(strlen(data));
}

}  // namespace

PgProcess::PgProcess(PgProcessOptions options)
    : ServerChild("postgres",
                  [](pid_t postmaster, int sig) {
                    SignalServer(postmaster, sig);
                    return true;
                  }),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<PgProcess>> PgProcess::Start(PgProcessOptions options) {
  std::unique_ptr<PgProcess> p(new PgProcess(std::move(options)));
  absl::StatusOr<std::string> bin = FindBinDir();
  if (!bin.ok()) return bin.status();
  p->bin_dir_ = *bin;
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string templ =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/dlock-pg-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return ErrnoStatus("mkdtemp");
  p->dir_ = templ;
  // sun_path holds 108 bytes including the NUL: "<dir>/.s.PGSQL.65535".
  if (p->dir_.size() + std::strlen("/.s.PGSQL.65535") > 107) {
    std::string sock = "/tmp/dlock-pgsock-XXXXXX";
    if (mkdtemp(sock.data()) == nullptr) return ErrnoStatus("mkdtemp");
    p->socket_dir_ = sock;
    p->owns_socket_dir_ = true;
  } else {
    p->socket_dir_ = p->dir_;
  }
  absl::Status s = p->InitDb();
  if (!s.ok()) return s;
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int> port = PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    p->port_ = *port;
    last = p->Spawn();
    if (last.ok()) last = p->WaitReady();
    if (last.ok()) return p;
    p->Kill().IgnoreError();
    // The port may have been taken between probing and binding: retry.
    if (!absl::StrContains(p->LogTail(), "in use")) break;
  }
  return last;
}

PgProcess::~PgProcess() {
  Stop().IgnoreError();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  if (owns_socket_dir_) std::filesystem::remove_all(socket_dir_, ignored);
}

std::string PgProcess::conninfo(const std::string& dbname) const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " user=postgres dbname=", dbname,
                      " connect_timeout=5");
}

absl::StatusOr<pid_t> PgProcess::RunChild(std::vector<std::string> args,
                                          const std::string& log_path,
                                          bool own_process_group) {
  // Everything the child needs is prepared before fork: after fork it only
  // makes async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const bool as_root = geteuid() == 0;
  const std::string uid_map = absl::StrCat(kNamespaceUid, " ", geteuid(), " 1\n");
  const std::string gid_map = absl::StrCat(kNamespaceGid, " ", getegid(), " 1\n");
  const pid_t parent = getpid();
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  pid_t pid = fork();
  if (pid < 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    return ErrnoStatus("fork");
  }
  if (pid == 0) {
    close(err_pipe[0]);
    // Reports why the child could not exec: a step number and errno.
    auto fail = [&](int step) {
      int code[2] = {step, errno};
      ssize_t ignored = write(err_pipe[1], code, sizeof(code));
      (void)ignored;
      _exit(127);
    };
    if (own_process_group) setpgid(0, 0);
    if (as_root) {
      // PostgreSQL refuses root: appear as `nobody` in a user namespace.
      if (unshare(CLONE_NEWUSER) != 0) fail(1);
      if (!WriteFile("/proc/self/setgroups", "deny")) fail(2);
      if (!WriteFile("/proc/self/uid_map", uid_map.c_str())) fail(3);
      if (!WriteFile("/proc/self/gid_map", gid_map.c_str())) fail(4);
    }
    // No orphans: die with the thread that started us (set after the
    // namespace change, which may clear it).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int null_fd = open("/dev/null", O_RDONLY);
    int out_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null_fd >= 0) dup2(null_fd, 0);
    if (out_fd >= 0) {
      dup2(out_fd, 1);
      dup2(out_fd, 2);
    }
    // Keep none of the caller's sockets alive in the server (the error pipe
    // is close-on-exec and stays open until exec).
    syscall(SYS_close_range, 3u, static_cast<unsigned>(err_pipe[1] - 1), 0u);
    syscall(SYS_close_range, static_cast<unsigned>(err_pipe[1] + 1), ~0u, 0u);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    fail(5);
  }
  close(err_pipe[1]);
  int code[2] = {0, 0};
  ssize_t n;
  do {
    n = read(err_pipe[0], code, sizeof(code));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(code))) {
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    static const char* const kSteps[] = {"", "unshare(CLONE_NEWUSER)", "write setgroups",
                                         "write uid_map", "write gid_map", "exec"};
    return absl::UnavailableError(absl::StrCat(
        "cannot start ", args[0], ": ", kSteps[code[0] < 6 ? code[0] : 0], " failed: ",
        std::strerror(code[1]),
        code[0] >= 1 && code[0] <= 4
            ? " (running as root, PostgreSQL needs a user namespace to run as non-root; "
              "run as a non-root user instead)"
            : ""));
  }
  return pid;
}

absl::Status PgProcess::InitDb() {
  const std::string log = dir_ + "/initdb.log";
  absl::StatusOr<pid_t> pid =
      RunChild({bin_dir_ + "/initdb", "-D", dir_ + "/data", "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--no-sync", "--locale=C"},
               log, /*own_process_group=*/false);
  if (!pid.ok()) return pid.status();
  int wstatus = 0;
  while (waitpid(*pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return absl::UnavailableError(
        absl::StrCat("initdb failed (status ", wstatus, "):\n", ReadTail(log, 2000)));
  }
  return absl::OkStatus();
}

absl::Status PgProcess::Spawn() {
  std::vector<std::string> args = {bin_dir_ + "/postgres",
                                   "-D",
                                   dir_ + "/data",
                                   "-p",
                                   absl::StrCat(port_),
                                   "-c",
                                   "listen_addresses=127.0.0.1",
                                   "-c",
                                   "unix_socket_directories=" + socket_dir_,
                                   "-c",
                                   "fsync=off",
                                   "-c",
                                   "full_page_writes=off",
                                   "-c",
                                   "shared_buffers=16MB",
                                   "-c",
                                   "max_connections=60",
                                   "-c",
                                   "logging_collector=off"};
  for (const std::string& s : options_.settings) args.insert(args.end(), {"-c", s});
  absl::StatusOr<pid_t> pid = RunChild(std::move(args), dir_ + "/postgres.log",
                                       /*own_process_group=*/true);
  if (!pid.ok()) return pid.status();
  Started(*pid);
  return absl::OkStatus();
}

absl::Status PgProcess::WaitReady() {
  const std::string info = conninfo();
  return ServerChild::WaitReady(
      [&info] { return PQping(info.c_str()) == PQPING_OK; }, options_.start_timeout,
      absl::Milliseconds(20),
      absl::StrCat("on 127.0.0.1:", port_, " did not accept connections"),
      [this] { return LogTail(); }, [this] { return LogTail(); });
}

// Fast shutdown (SIGINT to the postmaster: open transactions are rolled
// back), SIGKILL after 20 s.
absl::Status PgProcess::Stop() {
  return StopWith(SIGINT, absl::Seconds(20), absl::Milliseconds(5));
}

absl::Status PgProcess::Restart() {
  absl::Status s = Stop();
  if (!s.ok()) return s;
  // After Kill() a backend may still be exiting and hold the old shared
  // memory: the new postmaster then refuses to start; retry until the
  // deadline.
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (true) {
    s = Spawn();
    if (s.ok()) s = WaitReady();
    if (s.ok() || absl::Now() >= deadline) return s;
    Kill().IgnoreError();
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::string PgProcess::LogTail(size_t max_bytes) const {
  return ReadTail(dir_ + "/postgres.log", max_bytes);
}

}  // namespace test_support
}  // namespace dlock
