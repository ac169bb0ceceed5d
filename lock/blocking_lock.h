// Forwarding header: the blocking facade (`BlockingLock`, `LockGuard`) lives
// in dlock/blocking/blocking_lock.h (target //blocking:blocking_lock). Kept
// so code that includes the old path still compiles; new code should
// include the new one.
#ifndef DLOCK_LOCK_BLOCKING_LOCK_H_
#define DLOCK_LOCK_BLOCKING_LOCK_H_

#include "dlock/blocking/blocking_lock.h"

#endif  // DLOCK_LOCK_BLOCKING_LOCK_H_
