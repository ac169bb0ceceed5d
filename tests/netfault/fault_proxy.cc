#include "dlock/tests/netfault/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace netfault {
namespace {

constexpr int kMaxWaitMs = 50;
constexpr size_t kReadChunk = 64 * 1024;
// Reading stops while this much of one direction is held (stall/delay).
constexpr size_t kMaxHeldBytes = 16 * 1024 * 1024;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool ParseAddr(const std::string& host, int port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  return port >= 0 && port <= 65535 && inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1;
}

void CloseWithReset(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

struct Chunk {
  int64_t due_ns;
  std::string bytes;
};

struct Half {
  std::deque<Chunk> queue;   // read, waiting for their time
  std::string out;           // due, being written
  size_t out_off = 0;
  size_t held = 0;           // bytes in queue + out not yet written
  int64_t last_due = 0;
  bool eof = false;
};

struct Conn {
  int fd[2] = {-1, -1};  // [0] client side, [1] server side
  bool connecting = true;
  bool dead = false;
  Half half[2];          // indexed by Direction
  // Direction d reads fd[d] and writes fd[1 - d].
};

}  // namespace

struct FaultProxy::Impl {
  FaultProxyOptions options;
  std::string host;
  int port = 0;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  absl::Duration delay[2];
  absl::Duration jitter[2];
  bool stalled[2] = {false, false};
  bool blackhole[2] = {false, false};
  bool refuse = false;
  int64_t reset_requests = 0;   // asked for
  int64_t reset_done = 0;       // carried out by the thread
  int last_reset_count = 0;
  FaultProxyStats stats;
  std::list<Conn> conns;
  std::mt19937_64 rng;

  ~Impl() {
    if (listen_fd >= 0) close(listen_fd);
    for (int fd : wake) {
      if (fd >= 0) close(fd);
    }
  }

  void Wake() {
    char c = 1;
    (void)!write(wake[1], &c, 1);
  }

  int64_t Draw(int d) {
    int64_t base = absl::ToInt64Nanoseconds(delay[d]);
    int64_t j = absl::ToInt64Nanoseconds(jitter[d]);
    if (j > 0) base += static_cast<int64_t>(rng() % static_cast<uint64_t>(j));
    return base;
  }

  void Kill(Conn& c) {
    if (c.dead) return;
    for (int& fd : c.fd) {
      CloseWithReset(fd);
      fd = -1;
    }
    c.dead = true;
  }

  void CloseGracefully(Conn& c) {
    if (c.dead) return;
    for (int& fd : c.fd) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    c.dead = true;
  }

  void Accept(int64_t now) {
    for (int n = 0; n < 16; ++n) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      ++stats.accepted;
      if (refuse || static_cast<int>(conns.size()) >= options.max_connections) {
        CloseWithReset(fd);
        ++stats.resets;
        continue;
      }
      int up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_in target;
      ParseAddr(options.target_host, options.target_port, &target);
      bool ok = up >= 0;
      if (ok) {
        int one = 1;
        setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      }
      if (ok && !options.source_host.empty()) {
        sockaddr_in src;
        ParseAddr(options.source_host, 0, &src);
        ok = bind(up, reinterpret_cast<sockaddr*>(&src), sizeof(src)) == 0;
      }
      if (ok) {
        int r = connect(up, reinterpret_cast<sockaddr*>(&target), sizeof(target));
        ok = r == 0 || errno == EINPROGRESS;
      }
      if (!ok) {
        if (up >= 0) close(up);
        CloseWithReset(fd);
        continue;
      }
      Conn& c = conns.emplace_back();
      c.fd[0] = fd;
      c.fd[1] = up;
      for (Half& h : c.half) h.last_due = now;
    }
  }

  void Read(Conn& c, int d, int64_t now) {
    Half& h = c.half[d];
    if (h.eof || h.held >= kMaxHeldBytes) return;
    std::string buf(kReadChunk, '\0');
    ssize_t n = read(c.fd[d], buf.data(), buf.size());
    if (n > 0) {
      buf.resize(static_cast<size_t>(n));
      if (blackhole[d]) {
        stats.dropped[d] += n;
        return;
      }
      int64_t due = std::max(h.last_due, now + Draw(d));
      h.last_due = due;
      h.held += buf.size();
      h.queue.push_back(Chunk{due, std::move(buf)});
    } else if (n == 0) {
      h.eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      Kill(c);  // a reset on one side resets the other
    }
  }

  void Write(Conn& c, int d) {
    Half& h = c.half[d];
    while (h.out_off < h.out.size()) {
      ssize_t n = send(c.fd[1 - d], h.out.data() + h.out_off, h.out.size() - h.out_off,
                       MSG_NOSIGNAL);
      if (n > 0) {
        h.out_off += static_cast<size_t>(n);
        h.held -= static_cast<size_t>(n);
        stats.forwarded[d] += n;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      Kill(c);
      return;
    }
    h.out.clear();
    h.out_off = 0;
  }

  // Moves due chunks to `out`; returns the next due time of what stays
  // queued (INT64_MAX if none or stalled).
  int64_t Promote(Conn& c, int d, int64_t now) {
    Half& h = c.half[d];
    if (stalled[d]) return INT64_MAX;
    while (!h.queue.empty() && h.queue.front().due_ns <= now) {
      if (h.out_off > 0) {
        h.out.erase(0, h.out_off);
        h.out_off = 0;
      }
      h.out += h.queue.front().bytes;
      h.queue.pop_front();
    }
    return h.queue.empty() ? INT64_MAX : h.queue.front().due_ns;
  }

  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    std::vector<pollfd> fds;
    std::vector<std::pair<Conn*, int>> owners;  // per pollfd: conn, side
    while (!stop) {
      if (reset_requests > reset_done) {
        int n = 0;
        for (Conn& c : conns) {
          if (!c.dead) {
            Kill(c);
            ++n;
          }
        }
        stats.resets += n;
        last_reset_count = n;
        reset_done = reset_requests;
        cv.notify_all();
      }
      conns.remove_if([](const Conn& c) { return c.dead; });
      int64_t now = NowNs();
      int64_t next_due = INT64_MAX;
      fds.clear();
      owners.clear();
      fds.push_back({wake[0], POLLIN, 0});
      owners.emplace_back(nullptr, 0);
      fds.push_back({listen_fd, POLLIN, 0});
      owners.emplace_back(nullptr, 1);
      for (Conn& c : conns) {
        for (int d = 0; d < 2; ++d) next_due = std::min(next_due, Promote(c, d, now));
        for (int side = 0; side < 2; ++side) {
          short ev = 0;
          if (side == 1 && c.connecting) {
            ev = POLLOUT;
          } else {
            // Side `side` is read by direction `side` and written by 1 - side.
            if (!c.half[side].eof && c.half[side].held < kMaxHeldBytes) ev |= POLLIN;
            if (!c.connecting && c.half[1 - side].out_off < c.half[1 - side].out.size()) {
              ev |= POLLOUT;
            }
          }
          fds.push_back({c.fd[side], ev, 0});
          owners.emplace_back(&c, side);
        }
      }
      int wait_ms = kMaxWaitMs;
      if (next_due != INT64_MAX) {
        int64_t ms = (next_due - now + 999999) / 1000000;
        wait_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, kMaxWaitMs)));
      }
      lock.unlock();
      int r = poll(fds.data(), fds.size(), wait_ms);
      lock.lock();
      if (stop) break;
      if (r <= 0) continue;
      now = NowNs();
      for (size_t i = 0; i < fds.size(); ++i) {
        const short re = fds[i].revents;
        if (re == 0) continue;
        Conn* c = owners[i].first;
        const int side = owners[i].second;
        if (c == nullptr) {
          if (side == 0) {
            char buf[64];
            while (read(wake[0], buf, sizeof(buf)) > 0) {
            }
          } else {
            Accept(now);
          }
          continue;
        }
        if (c->dead) continue;
        if (side == 1 && c->connecting) {
          int err = 0;
          socklen_t len = sizeof(err);
          getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            Kill(*c);
          } else if (re & (POLLOUT | POLLERR | POLLHUP)) {
            c->connecting = false;
          }
          continue;
        }
        if (re & (POLLIN | POLLHUP | POLLERR)) Read(*c, side, now);
        if (!c->dead && (re & POLLOUT)) Write(*c, 1 - side);
      }
      // Promote and write what is due now; close connections whose EOF has
      // been forwarded.
      now = NowNs();
      for (Conn& c : conns) {
        if (c.dead || c.connecting) continue;
        for (int d = 0; d < 2 && !c.dead; ++d) {
          Promote(c, d, now);
          Write(c, d);
        }
        if (c.dead) continue;
        for (int d = 0; d < 2; ++d) {
          if (c.half[d].eof && c.half[d].held == 0) {
            CloseGracefully(c);
            break;
          }
        }
      }
    }
    for (Conn& c : conns) Kill(c);
    conns.clear();
  }
};

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(FaultProxyOptions options) {
  sockaddr_in listen_addr, target, src;
  if (!ParseAddr(options.listen_host, options.listen_port, &listen_addr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault proxy: bad listen address ", options.listen_host));
  }
  if (options.target_port <= 0 || !ParseAddr(options.target_host, options.target_port, &target)) {
    return absl::InvalidArgumentError(absl::StrCat("fault proxy: bad target ",
                                                   options.target_host, ":",
                                                   options.target_port));
  }
  if (!options.source_host.empty() && !ParseAddr(options.source_host, 0, &src)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault proxy: bad source address ", options.source_host));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->host = options.listen_host;
  impl->rng.seed(options.seed != 0 ? options.seed : std::random_device()());
  if (pipe2(impl->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("fault proxy: pipe: ", strerror(errno)));
  }
  impl->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (impl->listen_fd < 0 ||
      setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&listen_addr), sizeof(listen_addr)) != 0 ||
      listen(impl->listen_fd, 128) != 0) {
    return absl::UnavailableError(absl::StrCat("fault proxy: listen on ", options.listen_host,
                                               ":", options.listen_port, ": ",
                                               strerror(errno)));
  }
  sockaddr_in bound;
  socklen_t len = sizeof(bound);
  getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  impl->port = ntohs(bound.sin_port);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(impl)));
}

FaultProxy::FaultProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->Wake();
  impl_->thread.join();
}

const std::string& FaultProxy::host() const { return impl_->host; }
int FaultProxy::port() const { return impl_->port; }

void FaultProxy::SetDelay(Direction d, absl::Duration base, absl::Duration jitter) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->delay[static_cast<int>(d)] = std::max(base, absl::ZeroDuration());
  impl_->jitter[static_cast<int>(d)] = std::max(jitter, absl::ZeroDuration());
  impl_->Wake();
}

void FaultProxy::SetStalled(Direction d, bool stalled) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->stalled[static_cast<int>(d)] = stalled;
  impl_->Wake();
}

void FaultProxy::SetBlackhole(Direction d, bool on) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->blackhole[static_cast<int>(d)] = on;
  impl_->Wake();
}

void FaultProxy::SetRefuse(bool on) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->refuse = on;
}

int FaultProxy::ResetConnections() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  const int64_t ticket = ++impl_->reset_requests;
  impl_->Wake();
  // The proxy thread closes the sockets (never while it polls them); its
  // every wait is bounded, so this one is too.
  impl_->cv.wait(lock, [&] { return impl_->reset_done >= ticket || impl_->stop; });
  return impl_->last_reset_count;
}

void FaultProxy::Heal() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (int d = 0; d < 2; ++d) {
    impl_->delay[d] = absl::ZeroDuration();
    impl_->jitter[d] = absl::ZeroDuration();
    impl_->stalled[d] = false;
    impl_->blackhole[d] = false;
  }
  impl_->refuse = false;
  impl_->Wake();
}

FaultProxyStats FaultProxy::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  FaultProxyStats s = impl_->stats;
  s.open = static_cast<int64_t>(impl_->conns.size());
  for (const Conn& c : impl_->conns) {
    for (int d = 0; d < 2; ++d) s.held[d] += static_cast<int64_t>(c.half[d].held);
  }
  return s;
}

}  // namespace netfault
}  // namespace dlock
