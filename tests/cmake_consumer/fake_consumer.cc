// An out-of-tree unit test in the style dlock's users write: SimpleLock on
// dlock::fake (FakeRedis + FakeTransport on a ManualEventLoop), no server.
// Exits 0 when a second acquire is refused with kAborted and the lock can be
// taken again after release or once its TTL ran out in virtual time.
#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

absl::StatusOr<dlock::Lease> Acquire(dlock::ManualEventLoop& loop, dlock::Lock& lock,
                                     absl::Duration ttl) {
  std::optional<absl::StatusOr<dlock::Lease>> result;
  dlock::AcquireOptions options;
  options.ttl = ttl;
  auto handle = lock.Acquire("fake-consumer", options,
                             [&](absl::StatusOr<dlock::Lease> l) { result = std::move(l); });
  if (!handle.ok()) return handle.status();
  loop.RunUntilIdle();
  if (!result) return absl::InternalError("callback did not run");
  return *result;
}

}  // namespace

int main() {
  dlock::ManualEventLoop loop;
  dlock::FakeRedis server(&loop);
  dlock::FakeTransport conn(&loop, &server);
  dlock::SimpleLock lock(&loop, &conn);
  absl::StatusOr<dlock::Lease> first = Acquire(loop, lock, absl::Seconds(5));
  Check(first.ok(), "fake: first acquire: " + first.status().ToString());
  absl::StatusOr<dlock::Lease> second = Acquire(loop, lock, absl::Seconds(5));
  Check(absl::IsAborted(second.status()),
        "fake: second acquire refused with kAborted: " + second.status().ToString());
  loop.AdvanceTime(absl::Seconds(6));
  absl::StatusOr<dlock::Lease> third = Acquire(loop, lock, absl::Seconds(5));
  Check(third.ok(), "fake: acquire after the TTL ran out: " + third.status().ToString());
  std::printf("%s\n", failures == 0 ? "fake consumer: PASS" : "fake consumer: FAIL");
  return failures == 0 ? 0 : 1;
}
