#include "dlock/tests/netfault/test_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace dlock {
namespace netfault {

EchoServer::EchoServer(const std::string& host) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listen_fd_, 16) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  socklen_t len = sizeof(a);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Run(); });
}

EchoServer::~EchoServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void EchoServer::Run() {
  std::vector<int> conns;
  while (!stop_) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (int c : conns) fds.push_back({c, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) conns.push_back(c);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        received_ += n;
        (void)!send(fds[i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fds[i].fd);
        ++closed_;
        for (auto it = conns.begin(); it != conns.end(); ++it) {
          if (*it == fds[i].fd) {
            conns.erase(it);
            break;
          }
        }
      }
    }
  }
  for (int c : conns) close(c);
}

int ConnectTo(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string RecvN(int fd, size_t n, absl::Duration timeout, int* error) {
  std::string out;
  const absl::Time end = absl::Now() + timeout;
  if (error) *error = 0;
  while (out.size() < n) {
    int ms = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
    if (ms <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) continue;
    char buf[4096];
    ssize_t r = recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (r > 0) {
      out.append(buf, static_cast<size_t>(r));
    } else {
      if (error) *error = r == 0 ? -1 : errno;
      break;
    }
  }
  return out;
}

}  // namespace netfault
}  // namespace dlock
