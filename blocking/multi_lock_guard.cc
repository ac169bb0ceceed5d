#include "dlock/blocking/multi_lock_guard.h"

#include <utility>
#include <vector>

namespace dlock {

std::vector<Lease> MultiLockGuard::leases() const {
  std::vector<Lease> out;
  for (const LockGuard& g : guards_) out.push_back(g.lease());
  return out;
}

bool MultiLockGuard::IsValid() const {
  if (guards_.empty()) return false;
  for (const LockGuard& g : guards_) {
    if (!g.IsValid()) return false;
  }
  return true;
}

absl::Status MultiLockGuard::Unlock() {
  if (guards_.empty()) return absl::FailedPreconditionError("the guard owns no lock");
  std::vector<LockGuard> guards = std::move(guards_);
  guards_.clear();
  absl::Status first;
  for (auto it = guards.rbegin(); it != guards.rend(); ++it) {
    absl::Status s = it->Unlock();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace dlock
