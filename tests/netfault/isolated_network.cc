#include "dlock/tests/netfault/isolated_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace dlock {
namespace netfault {
namespace {

constexpr int kCutPriority = 10;
constexpr int kLocalPriority = 100;

std::string FindIp() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

bool IsLoopback(const std::string& addr) {
  in_addr a;
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

absl::Status Unavailable(const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("network namespaces unavailable: ", why));
}

}  // namespace

absl::Status RunIp(const std::string& ip_binary, const std::vector<std::string>& args) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(ip_binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    dup2(err_pipe[1], 2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execv(ip_binary.c_str(), argv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(err_pipe[0], buf, sizeof(buf))) > 0 && err.size() < 4096) {
    err.append(buf, static_cast<size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("ip ", absl::StrJoin(args, " "), ": ",
                                          absl::StripAsciiWhitespace(err)));
}

absl::StatusOr<std::unique_ptr<IsolatedNetwork>> IsolatedNetwork::Enter() {
  std::string ip = FindIp();
  if (ip.empty()) return Unavailable("no `ip` binary (install iproute2)");
  if (geteuid() != 0) return Unavailable("not root (needs CAP_SYS_ADMIN and CAP_NET_ADMIN)");
  int original = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original < 0) return Unavailable(absl::StrCat("/proc/thread-self/ns/net: ", strerror(errno)));
  if (unshare(CLONE_NEWNET) != 0) {
    const int e = errno;
    close(original);
    return Unavailable(absl::StrCat("unshare(CLONE_NEWNET): ", strerror(e)));
  }
  std::unique_ptr<IsolatedNetwork> net(new IsolatedNetwork(original, ip));
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"link", "set", "lo", "up"},
           {"rule", "add", "pref", absl::StrCat(kLocalPriority), "lookup", "local"},
           {"rule", "del", "pref", "0", "lookup", "local"}}) {
    if (absl::Status s = net->Ip(args); !s.ok()) return Unavailable(std::string(s.message()));
  }
  return net;
}

IsolatedNetwork::IsolatedNetwork(int original_ns_fd, std::string ip)
    : original_ns_fd_(original_ns_fd), ip_(std::move(ip)) {}

IsolatedNetwork::~IsolatedNetwork() {
  (void)Heal();
  // Back to where the thread was; the namespace dies with its last process.
  // (May fail in a sandbox: see the header; the thread then stays.)
  (void)setns(original_ns_fd_, CLONE_NEWNET);
  close(original_ns_fd_);
}

absl::Status IsolatedNetwork::Ip(const std::vector<std::string>& args) {
  return RunIp(ip_, args);
}

std::vector<std::string> IsolatedNetwork::RuleArgs(const Link& link, Direction d) {
  const bool to_server = d == Direction::kToServer;
  return {"pref", absl::StrCat(kCutPriority), to_server ? "to" : "from", link.address,
          "ipproto", "tcp", to_server ? "dport" : "sport", absl::StrCat(link.port),
          "blackhole"};
}

absl::Status IsolatedNetwork::Cut(const Link& link, Direction d) {
  if (!IsLoopback(link.address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("IsolatedNetwork cuts loopback links only, not ", link.address));
  }
  if (link.port <= 0 || link.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port ", link.port));
  }
  std::vector<std::string> rule = RuleArgs(link, d);
  if (std::find(rules_.begin(), rules_.end(), rule) != rules_.end()) return absl::OkStatus();
  std::vector<std::string> args = {"rule", "add"};
  args.insert(args.end(), rule.begin(), rule.end());
  if (absl::Status s = Ip(args); !s.ok()) return s;
  rules_.push_back(std::move(rule));
  return absl::OkStatus();
}

absl::Status IsolatedNetwork::Restore(const Link& link, Direction d) {
  std::vector<std::string> rule = RuleArgs(link, d);
  auto it = std::find(rules_.begin(), rules_.end(), rule);
  if (it == rules_.end()) return absl::OkStatus();
  std::vector<std::string> args = {"rule", "del"};
  args.insert(args.end(), rule.begin(), rule.end());
  absl::Status s = Ip(args);
  rules_.erase(it);
  return s;
}

absl::Status IsolatedNetwork::Heal() {
  absl::Status first;
  while (!rules_.empty()) {
    std::vector<std::string> args = {"rule", "del"};
    args.insert(args.end(), rules_.back().begin(), rules_.back().end());
    absl::Status s = Ip(args);
    if (first.ok() && !s.ok()) first = s;
    rules_.pop_back();
  }
  return first;
}

absl::Status RunIsolated(const std::function<void(IsolatedNetwork&)>& body) {
  absl::Status entered;
  std::thread t([&] {
    auto net = IsolatedNetwork::Enter();
    if (!net.ok()) {
      entered = net.status();
      return;
    }
    body(**net);
  });
  t.join();
  return entered;
}

}  // namespace netfault
}  // namespace dlock
