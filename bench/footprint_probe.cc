// bench/footprint's probe: the smallest complete program that uses
// SimpleLock + RetryLock + Watchdog, linked statically with --gc-sections, so
// the linker map shows what such a program pays of dlock. The loop and
// transport here are inert stand-ins defined in this file (a real program
// brings its own, e.g. //transport/uv, counted apart): they keep the
// linker from dropping anything the three classes can reach.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/watchdog/watchdog.h"

namespace {

class ProbeLoop : public dlock::EventLoop {
 public:
  absl::Time Now() const override { return absl::Now(); }
  dlock::TimerId RunAfter(absl::Duration, absl::AnyInvocable<void() &&>) override {
    return ++next_;
  }
  bool Cancel(dlock::TimerId) override { return false; }

 private:
  dlock::TimerId next_ = 0;
};

class ProbeTransport : public dlock::Transport {
 public:
  absl::Status Send(std::vector<std::string>, absl::Duration,
                    dlock::ReplyCallback) override {
    return absl::UnavailableError("probe");
  }
  absl::StatusOr<std::unique_ptr<dlock::Subscription>> Subscribe(
      std::string, dlock::MessageCallback,
      absl::AnyInvocable<void(absl::Status) &&>) override {
    return absl::UnavailableError("probe");
  }
};

}  // namespace

int main(int argc, char**) {
  ProbeLoop loop;
  ProbeTransport transport;
  dlock::SimpleLock simple(&loop, &transport);
  dlock::RetryLock retry(&loop, &simple);
  dlock::Watchdog watchdog(&loop, &retry);
  dlock::AcquireOptions options;
  options.wait = absl::Seconds(argc);
  auto handle = retry.Acquire("probe", options, [&](absl::StatusOr<dlock::Lease> lease) {
    if (!lease.ok()) return;
    auto watch = watchdog.Watch(*lease, dlock::WatchOptions());
    if (watch.ok()) watch->Release([](absl::Status) {}).IgnoreError();
  });
  return handle.ok() ? 0 : 1;
}
