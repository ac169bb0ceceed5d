#include "dlock/tests/testing/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "dlock/transport/uv/hiredis_reply.h"

namespace dlock {
namespace testing {
namespace {

// How many fresh ports Start tries when the chosen one was taken between
// probing and the server's bind.
constexpr int kStartAttempts = 5;

absl::Status ErrnoStatus(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Asks the kernel for a free loopback TCP port: bind port 0, read it, close.
absl::StatusOr<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = ErrnoStatus("bind");
    close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = ErrnoStatus("getsockname");
    close(fd);
    return s;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

absl::StatusOr<std::string> FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr || *path == '\0') path = "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(name, " not found on PATH (", path,
                                          "); install redis-server"));
}

absl::StatusOr<std::string> MakeTempDir(const std::string& parent,
                                        absl::string_view prefix) {
  std::string templ = absl::StrCat(parent, "/", prefix, "XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return ErrnoStatus(absl::StrCat("mkdtemp ", templ));
  }
  return std::string(buf.data());
}

std::string ReadTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  if (all.size() > max_bytes) all = all.substr(all.size() - max_bytes);
  return all;
}

}  // namespace

RedisServer::RedisServer(RedisServerOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(
    RedisServerOptions options) {
  auto server = std::unique_ptr<RedisServer>(new RedisServer(std::move(options)));
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base;
  if (tmp != nullptr && *tmp != '\0') {
    base = tmp;
  } else {
    auto made = MakeTempDir("/tmp", "dlock-test-");
    if (!made.ok()) return made.status();
    base = *made;
  }
  auto dir = MakeTempDir(base, "redis-");
  if (!dir.ok()) return dir.status();
  server->dir_ = *dir;
  server->log_path_ = server->dir_ + "/redis.log";

  absl::Status last;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    last = server->Spawn();
    if (last.ok()) last = server->WaitReady();
    if (last.ok()) return server;
    if (absl::IsNotFound(last)) return last;
    // The port may have been taken between probing and binding; a server
    // that is still running is stuck, so get rid of it before trying again.
    server->Kill().IgnoreError();
    if (!absl::StrContains(server->LogTail(), "already in use")) break;
  }
  return last;
}

RedisServer::~RedisServer() {
  DropConnection();
  Stop().IgnoreError();
  std::string sock = unix_socket();
  if (!sock.empty()) unlink(sock.c_str());
}

std::string RedisServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

std::string RedisServer::unix_socket() const {
  if (!options_.unix_socket) return "";
  // sun_path holds 108 bytes; Bazel's TEST_TMPDIR can be longer, so keep the
  // socket in /tmp, named after the (unique) port.
  return absl::StrCat("/tmp/dlock-redis-", port_, ".sock");
}

absl::Status RedisServer::Spawn() {
  auto binary = FindOnPath("redis-server");
  if (!binary.ok()) return binary.status();

  std::vector<std::string> args = {
      *binary,        "--port",    absl::StrCat(port_), "--bind",
      host_,          "--dir",     dir_,                "--daemonize",
      "no",           "--logfile", log_path_,           "--save",
      "",
  };
  if (options_.appendonly) {
    args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    args.insert(args.end(), {"--appendonly", "no"});
  }
  if (options_.unix_socket) {
    args.insert(args.end(),
                {"--unixsocket", unix_socket(), "--unixsocketperm", "700"});
  }
  if (!options_.password.empty()) {
    args.insert(args.end(), {"--requirepass", options_.password});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

  // Everything the child needs is prepared before fork: after fork it only
  // makes async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string out_path = dir_ + "/stdout.log";
  const pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    // No orphans: die with the thread that started us.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int null_fd = open("/dev/null", O_RDONLY);
    int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null_fd >= 0) dup2(null_fd, 0);
    if (out_fd >= 0) {
      dup2(out_fd, 1);
      dup2(out_fd, 2);
    }
    // Keep none of the test's sockets (e.g. client connections) alive in
    // the server.
    syscall(SYS_close_range, 3u, ~0u, 0u);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  paused_ = false;
  return absl::OkStatus();
}

absl::Status RedisServer::WaitReady() {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  std::string last_error = "no attempt";
  while (absl::Now() < deadline) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat(
          "redis-server exited during startup (status ", wstatus,
          "). Log tail:\n", LogTail(), ReadTail(dir_ + "/stdout.log", 1000)));
    }
    DropConnection();
    absl::StatusOr<Reply> pong = Command({"PING"});
    if (pong.ok() && pong->is_status() && pong->str == "PONG") {
      return absl::OkStatus();
    }
    last_error = pong.ok() ? pong->DebugString() : pong.status().ToString();
    // Polling an external process for readiness, bounded by `deadline`.
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::UnavailableError(absl::StrCat(
      "redis-server on ", address(), " did not answer PING within ",
      absl::FormatDuration(options_.start_timeout), " (last: ", last_error,
      "). Log tail:\n", LogTail()));
}

absl::Status RedisServer::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      paused_ = false;
      return absl::OkStatus();
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("redis-server did not exit");
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

void RedisServer::DropConnection() {
  if (conn_ != nullptr) {
    redisFree(conn_);
    conn_ = nullptr;
  }
}

absl::Status RedisServer::Pause() {
  if (!running()) return absl::FailedPreconditionError("server not running");
  if (kill(pid_, SIGSTOP) != 0) return ErrnoStatus("kill(SIGSTOP)");
  // Wait until the stop has taken effect, so the test's next step really
  // meets a stopped server.
  int wstatus = 0;
  if (waitpid(pid_, &wstatus, WUNTRACED) != pid_ || !WIFSTOPPED(wstatus)) {
    return absl::InternalError("redis-server did not stop");
  }
  paused_ = true;
  return absl::OkStatus();
}

absl::Status RedisServer::Resume() {
  if (!running()) return absl::FailedPreconditionError("server not running");
  if (kill(pid_, SIGCONT) != 0) return ErrnoStatus("kill(SIGCONT)");
  paused_ = false;
  return absl::OkStatus();
}

absl::Status RedisServer::Kill() {
  DropConnection();
  if (!running()) return absl::OkStatus();
  kill(pid_, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  paused_ = false;
  return absl::OkStatus();
}

absl::Status RedisServer::Stop() {
  DropConnection();
  if (!running()) return absl::OkStatus();
  if (paused_) kill(pid_, SIGCONT);
  kill(pid_, SIGTERM);
  if (WaitExit(absl::Seconds(10)).ok()) return absl::OkStatus();
  return Kill();
}

absl::Status RedisServer::Restart() {
  absl::Status s = Stop();
  if (!s.ok()) return s;
  s = Spawn();
  if (s.ok()) s = WaitReady();
  return s;
}

absl::StatusOr<Reply> RedisServer::Command(std::vector<std::string> argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (!running()) return absl::UnavailableError("server not running");
  if (conn_ == nullptr) {
    timeval connect_timeout = {1, 0};
    conn_ = redisConnectWithTimeout(host_.c_str(), port_, connect_timeout);
    if (conn_ == nullptr || conn_->err) {
      std::string err = conn_ ? conn_->errstr : "out of memory";
      DropConnection();
      return absl::UnavailableError(absl::StrCat("connect ", address(), ": ", err));
    }
    timeval io_timeout = absl::ToTimeval(options_.command_timeout);
    redisSetTimeout(conn_, io_timeout);
    if (!options_.password.empty()) {
      absl::StatusOr<Reply> auth = Command({"AUTH", options_.password});
      if (!auth.ok()) return auth.status();
      if (auth->is_error()) {
        DropConnection();
        return absl::UnavailableError(absl::StrCat("AUTH: ", auth->str));
      }
    }
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(conn_, static_cast<int>(argv.size()), ptrs.data(),
                               lens.data());
  if (raw == nullptr) {
    std::string err = conn_->errstr;
    DropConnection();
    return absl::UnavailableError(absl::StrCat(address(), ": ", err));
  }
  redisReply* reply = static_cast<redisReply*>(raw);
  Reply out = ReplyFromHiredis(*reply);
  freeReplyObject(reply);
  return out;
}

std::string RedisServer::LogTail(size_t max_bytes) const {
  return ReadTail(log_path_, max_bytes);
}

}  // namespace testing
}  // namespace dlock
