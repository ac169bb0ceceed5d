// Internal to //blocking:blocking_lock. This header defines
// `AcquiresInFlight`: on the loop thread, the acquisitions BlockingLock has
// started and that have not called back yet, kept so that Shutdown can
// cancel them all at once (each caller then gets kCancelled; the wrapped
// lock gives back whatever the attempt took, as Cancel() promises).
//
// Not thread-safe: call only on the loop thread.
#ifndef DLOCK_BLOCKING_ACQUIRES_IN_FLIGHT_H_
#define DLOCK_BLOCKING_ACQUIRES_IN_FLIGHT_H_

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"

namespace dlock {

class AcquiresInFlight {
 public:
  using Start = absl::FunctionRef<absl::StatusOr<AcquireHandle>(MultiLeaseCallback)>;

  AcquiresInFlight() = default;
  AcquiresInFlight(const AcquiresInFlight&) = delete;
  AcquiresInFlight& operator=(const AcquiresInFlight&) = delete;

  // Calls `start` with a callback that forgets the acquisition, then runs
  // `callback`; keeps the handle `start` returns until then. On `start`'s
  // error, returns it (`callback` was destroyed without running).
  absl::Status Begin(Start start, MultiLeaseCallback callback) {
    const uint64_t id = next_id_++;
    absl::StatusOr<AcquireHandle> handle =
        start([this, id, callback = std::move(callback)](
                  absl::StatusOr<std::vector<Lease>> leases) mutable {
          handles_.erase(id);
          std::move(callback)(std::move(leases));
        });
    if (!handle.ok()) return handle.status();
    handles_[id] = *std::move(handle);
    return absl::OkStatus();
  }

  // Cancels every acquisition in flight: none of their callbacks will run.
  void CancelAll() {
    std::unordered_map<uint64_t, AcquireHandle> handles = std::move(handles_);
    handles_.clear();
    for (auto& [id, handle] : handles) handle.Cancel();
  }

 private:
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, AcquireHandle> handles_;
};

}  // namespace dlock

#endif  // DLOCK_BLOCKING_ACQUIRES_IN_FLIGHT_H_
