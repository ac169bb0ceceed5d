#include "dlock/lock/lease_cleanup.h"

#include <memory>
#include <utility>

namespace dlock {

namespace {

constexpr int kCleanupAttempts = 3;
constexpr absl::Duration kCleanupRetryDelay = absl::Milliseconds(100);

void CleanupAttempt(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                    std::shared_ptr<CleanupSend> send, int attempts_left) {
  // Kept here too: a transport that rejects the send drops the callback,
  // and with it the last other reference, before `s` returns.
  std::shared_ptr<CleanupSend> keep = send;
  CleanupSend& s = *keep;
  absl::Status sent = s([core = std::move(core), key_expiry, send = std::move(send),
                         attempts_left](bool unknown) mutable {
    if (!unknown || attempts_left <= 1) return;
    if (core->loop->Now() + kCleanupRetryDelay >= key_expiry) return;
    LeaseCore* c = core.get();
    c->retries.RunLater(kCleanupRetryDelay, [core = std::move(core), key_expiry,
                                              send = std::move(send),
                                              attempts_left]() mutable {
      CleanupAttempt(std::move(core), key_expiry, std::move(send), attempts_left - 1);
    });
  });
  // A rejected send (transport closed): nothing more we can do; the key
  // expires by its TTL.
  (void)sent;
}

}  // namespace

bool IsUnknownOutcome(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

void CleanupDone::Finish(const absl::Status& status) {
  std::move(done)(IsUnknownOutcome(status));
}

void RunCleanup(std::shared_ptr<LeaseCore> core, absl::Time key_expiry,
                CleanupSend send) {
  CleanupAttempt(std::move(core), key_expiry,
                 std::make_shared<CleanupSend>(std::move(send)), kCleanupAttempts);
}

}  // namespace dlock
