#include "dlock/transport/uv/background_wait.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <uv.h>

#include <cstdint>

namespace dlock {

using Clock = std::chrono::steady_clock;

BackgroundWait::BackgroundWait() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

BackgroundWait::~BackgroundWait() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void BackgroundWait::Poll(Mutex* mu, uv_loop_s* loop, int timeout) {
  polling_ = true;
  wakes_ = timeout < 0 ? Clock::time_point::max()
                       : Clock::now() + std::chrono::milliseconds(timeout);
  mu->Unlock();
  struct pollfd fds[2] = {{uv_backend_fd(loop), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  (void)poll(fds, 2, timeout);
  if ((fds[1].revents & POLLIN) != 0) {
    uint64_t n;
    (void)!read(wake_fd_, &n, sizeof(n));
  }
  mu->Lock();
  polling_ = false;
  wakes_ = Clock::time_point::max();
}

void BackgroundWait::Park(Mutex* mu) { parked_ = true; }

void BackgroundWait::WaitUntil(Mutex* mu, Clock::time_point deadline) {
  wakes_ = deadline;
  cv_.WaitUntil(mu, deadline);
}

void BackgroundWait::Unpark(Mutex* mu) {
  parked_ = false;
  wakes_ = Clock::time_point::max();
}

void BackgroundWait::Wake(Mutex* mu) {
  if (parked_) {
    cv_.Signal();
  } else if (polling_) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
}

void BackgroundWait::WakeFor(Mutex* mu, Clock::time_point due) {
  if (due < wakes_) Wake(mu);
}

void BackgroundWait::WakeIfParked(Mutex* mu) {
  if (parked_) cv_.Signal();
}

}  // namespace dlock
