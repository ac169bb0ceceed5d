// Quick start for a threaded program: one call connects, a guard holds the
// lock (renewed while held) and releases it when it goes out of scope.
//
//   bazel run //client:quickstart_blocking -- --redis=redis://127.0.0.1:6379
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/blocking/connect.h"

ABSL_FLAG(std::string, redis, "redis://127.0.0.1:6379",
          "Redis server URL (redis://[[user]:password@]host[:port][/db] or unix://path)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  // Connect: starts a loop thread, opens the connection, builds the lock stack.
  dlock::ConnectOptions options;
  options.redis_urls = {absl::GetFlag(FLAGS_redis)};  // several URLs: RedLock
  auto client = dlock::ConnectBlockingClient(options);
  if (!client.ok()) {
    std::cerr << "connect failed: " << client.status() << "\n";
    return 1;
  }
  {
    // Wait up to 5 s for the lock; its 10 s lease is renewed while we hold it.
    auto guard = (*client)->Lock("quickstart/report", absl::Seconds(10), absl::Seconds(5));
    if (!guard.ok()) {
      std::cerr << "lock failed: " << guard.status() << "\n";
      return 1;
    }
    // Hand the fencing token to what you protect, so it can reject stale holders.
    std::cout << "locked quickstart/report, fence " << guard->lease().fence << "\n";
    // Meanwhile nobody else gets it (this TryLock is refused with ABORTED).
    std::cout << "second TryLock: "
              << (*client)->TryLock("quickstart/report", absl::Seconds(10)).status() << "\n";
    std::cout << "still held: " << (guard->IsValid() ? "yes" : "no") << "\n";
  }  // ~LockGuard releases the lock here
  std::cout << "released; TryLock now: "
            << (*client)->TryLock("quickstart/report", absl::Seconds(10)).status() << "\n";
  return 0;
}
