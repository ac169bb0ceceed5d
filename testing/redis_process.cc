#include "dlock/testing/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

namespace dlock {
namespace test_support {
namespace {

absl::StatusOr<std::string> FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr || *path == '\0') path = "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  // Debian installs it in /usr/bin, which a minimal PATH may lack.
  if (access("/usr/bin/redis-server", X_OK) == 0) return std::string("/usr/bin/redis-server");
  return absl::NotFoundError(absl::StrCat(name, " not found on PATH (", path,
                                          "); install redis-server (tools/setup)"));
}

// Sends `argv` (after AUTH when `password` is set) over a fresh TCP
// connection and returns the first line of its reply ("+OK", "$-1", "-ERR
// ..."), or "" when nothing came back; each send and read waits at most
// `timeout`.
std::string RawCommand(int port, const std::string& password,
                       const std::vector<std::string>& argv,
                       timeval timeout = {2, 0}) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv = timeout;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  auto encode = [](const std::vector<std::string>& words) {
    std::string out = absl::StrCat("*", words.size(), "\r\n");
    for (const std::string& w : words) absl::StrAppend(&out, "$", w.size(), "\r\n", w, "\r\n");
    return out;
  };
  std::string request;
  size_t replies = 1;
  if (!password.empty()) {
    request = encode({"AUTH", password});
    replies = 2;
  }
  request += encode(argv);
  std::string line;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size())) {
    std::string in;
    char buf[256];
    while (static_cast<size_t>(std::count(in.begin(), in.end(), '\n')) < replies &&
           in.size() < 4096) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    std::vector<absl::string_view> lines =
        absl::StrSplit(in, "\r\n", absl::SkipEmpty());
    if (lines.size() == replies) line = std::string(lines.back());
  }
  close(fd);
  return line;
}

// One PING (after AUTH when `password` is set) over a fresh TCP connection;
// true when the PING is answered "+PONG".
bool Ping(int port, const std::string& password) {
  return RawCommand(port, password, {"PING"}, timeval{0, 200000}) == "+PONG";
}

}  // namespace

absl::StatusOr<int> PickFreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = ErrnoStatus("bind");
    close(fd);
    return s;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

RedisProcess::RedisProcess(RedisProcessOptions options)
    : ServerChild("redis-server", [](pid_t pid, int sig) { return kill(pid, sig) == 0; }),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(
    RedisProcessOptions options) {
  std::unique_ptr<RedisProcess> p(new RedisProcess(std::move(options)));
  if (!p->options_.dir.empty()) {
    p->dir_ = p->options_.dir;
  } else {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string templ = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/dlock-redis-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) return ErrnoStatus("mkdtemp");
    p->dir_ = templ;
    p->owns_dir_ = true;
  }
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int> port = PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    p->port_ = *port;
    last = p->Spawn();
    if (last.ok()) last = p->WaitReady();
    if (last.ok()) last = p->TrustDataSet();
    if (last.ok()) return p;
    if (absl::IsNotFound(last)) return last;
    // The port may have been taken between probing and binding; a server
    // that is still running is stuck, so get rid of it before trying again.
    p->Kill().IgnoreError();
    if (!absl::StrContains(p->LogTail(), "already in use")) break;
  }
  return last;
}

RedisProcess::~RedisProcess() {
  Stop().IgnoreError();
  std::string sock = unix_socket();
  if (!sock.empty()) unlink(sock.c_str());
  if (owns_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string RedisProcess::url() const {
  return absl::StrCat("redis://127.0.0.1:", port_);
}

std::string RedisProcess::unix_socket() const {
  if (!options_.unix_socket) return "";
  // sun_path holds 108 bytes; Bazel's TEST_TMPDIR can be longer, so keep the
  // socket in /tmp, named after the (unique) port.
  return absl::StrCat("/tmp/dlock-redis-", port_, ".sock");
}

absl::Status RedisProcess::Spawn() {
  absl::StatusOr<std::string> binary = FindOnPath("redis-server");
  if (!binary.ok()) return binary.status();
  std::vector<std::string> args = {*binary, "--port", absl::StrCat(port_),
                                   "--bind", "127.0.0.1", "--dir", dir_,
                                   "--daemonize", "no", "--logfile",
                                   dir_ + "/redis.log", "--save", ""};
  if (!options_.config_file.empty()) {
    args.insert(args.begin() + 1, options_.config_file);
  }
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
    // Keep none of the caller's sockets (e.g. client connections) alive in
    // the server.
    syscall(SYS_close_range, 3u, ~0u, 0u);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Started(pid);
  return absl::OkStatus();
}

absl::Status RedisProcess::WaitReady() {
  return ServerChild::WaitReady(
      [this] { return Ping(port_, options_.password); }, options_.start_timeout,
      absl::Milliseconds(5), absl::StrCat("on 127.0.0.1:", port_, " did not answer PING"),
      [this] { return LogTail(); },
      [this] { return LogTail() + ReadTail(dir_ + "/stdout.log", 1000); });
}

// SIGTERM, then SIGKILL after 10 s.
absl::Status RedisProcess::Stop() {
  return StopWith(SIGTERM, absl::Seconds(10), absl::Milliseconds(2));
}

absl::Status RedisProcess::TrustDataSet() {
  for (const std::string& prefix : options_.trusted_data_set_prefixes) {
    // NX: a persisted data set (options.dir) keeps the marker it has.
    const std::string line = RawCommand(
        port_, options_.password, {"SET", prefix + "data-set-began", "0", "NX"});
    if (line != "+OK" && line != "$-1") {
      return absl::UnavailableError(absl::StrCat(
          "redis-server on 127.0.0.1:", port_,
          ": could not declare the data set trusted (SET ", prefix,
          "data-set-began 0 NX): ", line.empty() ? "no reply" : line));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisProcess::Restart() {
  absl::Status s = Stop();
  if (!s.ok()) return s;
  s = Spawn();
  if (s.ok()) s = WaitReady();
  return s;
}

std::string RedisProcess::LogTail(size_t max_bytes) const {
  return ReadTail(dir_ + "/redis.log", max_bytes);
}

}  // namespace test_support
}  // namespace dlock
