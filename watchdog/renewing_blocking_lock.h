// Forwarding header. Auto-renewal is an option of the blocking facade now:
//
//   BlockingLockOptions options;
//   options.auto_renew = true;          // options.renewal: intervals, on_lost
//   BlockingLock locks(&thread, &lock, std::move(options));
//
// (dlock/blocking/blocking_lock.h, target //blocking:blocking_lock). The old
// names stay for code written against them: `RenewingBlockingLockOptions` is
// `RenewalOptions`, and `RenewingBlockingLock` is a BlockingLock constructed
// with `auto_renew` set (it adds nothing else).
#ifndef DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_
#define DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_

#include <utility>

#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/loop_thread.h"

namespace dlock {

using RenewingBlockingLockOptions = RenewalOptions;

class RenewingBlockingLock : public BlockingLock {
 public:
  RenewingBlockingLock(LoopThread* thread, dlock::Lock* lock,
                       RenewingBlockingLockOptions options = {})
      : BlockingLock(thread, lock, Renewing(std::move(options))) {}

 private:
  static BlockingLockOptions Renewing(RenewalOptions renewal) {
    BlockingLockOptions options;
    options.auto_renew = true;
    options.renewal = std::move(renewal);
    return options;
  }
};

}  // namespace dlock

#endif  // DLOCK_WATCHDOG_RENEWING_BLOCKING_LOCK_H_
