#include "dlock/bench/dlock_workloads.h"

#include "absl/status/status.h"

namespace dlock {
namespace bench {

absl::StatusOr<BenchResult> RunDlock(const DlockOptions& o, const std::string& workload) {
  // Not written yet: waits for //transport/uv, //lock policies and //redlock.
  return absl::UnimplementedError("dlock workloads not built yet");
}

}  // namespace bench
}  // namespace dlock
