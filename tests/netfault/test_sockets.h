// Test helpers for the fault harness's own tests: a TCP echo server on a
// thread (counts what it received, and connections closed) and blocking
// client sockets with bounded waits.
#ifndef DLOCK_TESTS_NETFAULT_TEST_SOCKETS_H_
#define DLOCK_TESTS_NETFAULT_TEST_SOCKETS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace dlock {
namespace netfault {

class EchoServer {
 public:
  // Listens on `host`:0 (a free port) and echoes every byte back.
  explicit EchoServer(const std::string& host = "127.0.0.1");
  ~EchoServer();
  bool ok() const { return listen_fd_ >= 0; }
  int port() const { return port_; }
  int64_t received() const { return received_.load(); }
  int64_t closed() const { return closed_.load(); }

 private:
  void Run();
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> received_{0};
  std::atomic<int64_t> closed_{0};
  std::thread thread_;
};

// A connected blocking socket to host:port, or -1.
int ConnectTo(const std::string& host, int port);
// Writes all of `s`; false on error.
bool SendAll(int fd, const std::string& s);
// Reads until `n` bytes arrived or `timeout` passed; returns what arrived.
// `error` (optional) gets errno of a failed read, or -1 on EOF.
std::string RecvN(int fd, size_t n, absl::Duration timeout, int* error = nullptr);
// Waits up to `timeout` for `pred` to hold, polling every 2 ms.
template <typename Pred>
bool WaitFor(Pred pred, absl::Duration timeout);

}  // namespace netfault
}  // namespace dlock

#include "absl/time/clock.h"

namespace dlock {
namespace netfault {
template <typename Pred>
bool WaitFor(Pred pred, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}
}  // namespace netfault
}  // namespace dlock

#endif  // DLOCK_TESTS_NETFAULT_TEST_SOCKETS_H_
