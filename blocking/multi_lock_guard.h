// This header defines `MultiLockGuard`: the guards of one all-or-nothing
// acquisition of several resources (BlockingLock::AcquireAll,
// BlockingClient::MultiLock), held and released together.
//
//   absl::StatusOr<MultiLockGuard> both =
//       client->MultiLock({"accounts/7", "accounts/3"}, absl::Seconds(10),
//                         absl::Seconds(3));
//   if (!both.ok()) return both.status();   // nothing is held
//   Transfer(both->leases());                // sorted: accounts/3, accounts/7
//   // ~MultiLockGuard releases every resource.
//
// Validity: IsValid() is true only while EVERY lease is (with auto-renewal,
// the watchdog renews each of them; losing any one means the set is lost:
// stop using all the resources).
//
// Thread-compatible (like LockGuard): one thread at a time; movable.
#ifndef DLOCK_BLOCKING_MULTI_LOCK_GUARD_H_
#define DLOCK_BLOCKING_MULTI_LOCK_GUARD_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/lock.h"

namespace dlock {

class MultiLockGuard {
 public:
  // Owns nothing.
  MultiLockGuard() = default;
  // Takes over `guards` (e.g. from BlockingLock::AcquireAll).
  explicit MultiLockGuard(std::vector<LockGuard> guards) : guards_(std::move(guards)) {}
  MultiLockGuard(MultiLockGuard&&) noexcept = default;
  MultiLockGuard& operator=(MultiLockGuard&&) noexcept = default;
  // Releases every lease still owned (each LockGuard's destructor).
  ~MultiLockGuard() = default;

  bool owns_lock() const { return !guards_.empty(); }
  explicit operator bool() const { return owns_lock(); }

  // One lease per resource, in the global (sorted) order.
  std::vector<Lease> leases() const;
  const std::vector<LockGuard>& guards() const { return guards_; }

  // True iff it owns something and every lease is valid.
  bool IsValid() const;

  // Releases every lease (in reverse order) and reports the first failure
  // (LockGuard::Unlock's codes), OK if all went well; kFailedPrecondition
  // when nothing is owned. Afterwards nothing is owned.
  absl::Status Unlock();

 private:
  std::vector<LockGuard> guards_;
};

}  // namespace dlock

#endif  // DLOCK_BLOCKING_MULTI_LOCK_GUARD_H_
