// An out-of-tree user of the installed dlock package (tools/cmake_test builds
// it once through find_package(dlock) and once through pkg-config). It starts
// its own redis-server on a free loopback port, then, against it:
//   1. SimpleLock on HiredisTransport (dlock::lock + dlock::uv, on a libuv
//      loop it owns): acquire; a second acquire is refused with kAborted;
//      release; acquire again.
//   2. BlockingClient (dlock::client): client A takes the lock, client B's
//      TryLock is refused with kAborted, A unlocks, B gets it.
// Exits 0 when every step did what it should, 1 otherwise (naming the step).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/blocking/connect.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

extern char** environ;

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

std::string Str(const absl::Status& s) { return s.ToString(); }

// A private redis-server on a free loopback port, stopped by the destructor.
class RedisServer {
 public:
  bool Start() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::perror("free port");
      return false;
    }
    port_ = ntohs(addr.sin_port);
    close(fd);
    char dir[] = "/tmp/dlock-consumer-XXXXXX";
    if (mkdtemp(dir) == nullptr) return false;
    dir_ = dir;
    std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_),
                                     "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--dir", dir_,
                                     "--logfile", dir_ + "/redis.log"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) {
      std::perror("posix_spawnp redis-server");
      pid_ = -1;
      return false;
    }
    // Up once it accepts a connection (bounded: 10 s).
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      int c = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in to = addr;
      to.sin_port = htons(port_);
      bool up = connect(c, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
      close(c);
      if (up) return true;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }
  ~RedisServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) {
      std::string log = dir_ + "/redis.log";
      unlink(log.c_str());
      rmdir(dir_.c_str());
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

// Runs `loop` until `done` holds or 10 s of loop time passed.
bool RunUntil(uv_loop_t* loop, const bool& done) {
  uint64_t deadline = uv_now(loop) + 10000;
  while (!done && uv_now(loop) < deadline) {
    uv_run(loop, UV_RUN_ONCE);
    uv_update_time(loop);
  }
  return done;
}

absl::StatusOr<dlock::Lease> Acquire(uv_loop_t* loop, dlock::Lock& lock) {
  bool done = false;
  std::optional<absl::StatusOr<dlock::Lease>> result;
  dlock::AcquireOptions options;
  options.ttl = absl::Seconds(10);
  auto handle = lock.Acquire("cmake-consumer/async", options,
                             [&](absl::StatusOr<dlock::Lease> lease) {
                               result = std::move(lease);
                               done = true;
                             });
  if (!handle.ok()) return handle.status();
  if (!RunUntil(loop, done)) return absl::DeadlineExceededError("no callback in 10 s");
  return *result;
}

absl::Status Release(uv_loop_t* loop, dlock::Lock& lock, const dlock::Lease& lease) {
  bool done = false;
  absl::Status result;
  absl::Status sent = lock.Release(lease, [&](absl::Status s) {
    result = s;
    done = true;
  });
  if (!sent.ok()) return sent;
  if (!RunUntil(loop, done)) return absl::DeadlineExceededError("no callback in 10 s");
  return result;
}

void SimpleLockOnHiredis(int port) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    dlock::UvEventLoop events(&loop);
    dlock::HiredisTransportOptions options;
    options.host = "127.0.0.1";
    options.port = port;
    absl::StatusOr<std::unique_ptr<dlock::HiredisTransport>> transport =
        dlock::HiredisTransport::Create(&loop, options);
    Check(transport.ok(), "HiredisTransport::Create: " + Str(transport.status()));
    if (!transport.ok()) return;
    {
      dlock::SimpleLock lock(&events, transport->get());
      absl::StatusOr<dlock::Lease> first = Acquire(&loop, lock);
      Check(first.ok(), "SimpleLock: first acquire: " + Str(first.status()));
      absl::StatusOr<dlock::Lease> second = Acquire(&loop, lock);
      Check(absl::IsAborted(second.status()),
            "SimpleLock: second acquire refused with kAborted: " + Str(second.status()));
      if (first.ok()) {
        absl::Status released = Release(&loop, lock, *first);
        Check(released.ok(), "SimpleLock: release: " + Str(released));
        absl::StatusOr<dlock::Lease> third = Acquire(&loop, lock);
        Check(third.ok(), "SimpleLock: acquire after release: " + Str(third.status()));
        if (third.ok()) {
          Check(third->fence > first->fence, "SimpleLock: fencing token increased");
          Release(&loop, lock, *third).IgnoreError();
        }
      }
    }
    (*transport)->Close();
    transport->reset();
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  Check(uv_loop_close(&loop) == 0, "libuv loop closes clean");
}

void BlockingClients(int port) {
  dlock::ConnectOptions options;
  options.redis_urls = {"redis://127.0.0.1:" + std::to_string(port)};
  absl::StatusOr<std::unique_ptr<dlock::BlockingClient>> a =
      dlock::ConnectBlockingClient(options);
  absl::StatusOr<std::unique_ptr<dlock::BlockingClient>> b =
      dlock::ConnectBlockingClient(options);
  Check(a.ok() && b.ok(), "BlockingClient::Connect (two clients)");
  if (!a.ok() || !b.ok()) return;
  absl::StatusOr<dlock::LockGuard> held = (*a)->TryLock("cmake-consumer/blocking", absl::Seconds(10));
  Check(held.ok(), "BlockingClient A: TryLock: " + Str(held.status()));
  absl::StatusOr<dlock::LockGuard> refused =
      (*b)->TryLock("cmake-consumer/blocking", absl::Seconds(10));
  Check(absl::IsAborted(refused.status()),
        "BlockingClient B: TryLock refused with kAborted: " + Str(refused.status()));
  if (!held.ok()) return;
  absl::Status unlocked = held->Unlock();
  Check(unlocked.ok(), "BlockingClient A: Unlock: " + Str(unlocked));
  absl::StatusOr<dlock::LockGuard> taken = (*b)->TryLock("cmake-consumer/blocking", absl::Seconds(10));
  Check(taken.ok(), "BlockingClient B: TryLock after A's unlock: " + Str(taken.status()));
}

}  // namespace

int main() {
  RedisServer server;
  if (!server.Start()) {
    std::fprintf(stderr, "FAIL: could not start redis-server\n");
    return 1;
  }
  SimpleLockOnHiredis(server.port());
  BlockingClients(server.port());
  std::printf("%s\n", failures == 0 ? "consumer: PASS" : "consumer: FAIL");
  return failures == 0 ? 0 : 1;
}
