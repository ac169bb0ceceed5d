// This header defines `NewToken()`: the random tokens of leases and owners.
#ifndef DLOCK_LOCK_TOKENS_H_
#define DLOCK_LOCK_TOKENS_H_

#include <string>

namespace dlock {

// A fresh random token: 128 bits from the kernel's CSPRNG (getrandom(2)),
// as 32 lower-case hex characters. Thread-safe and fork-safe: every token
// is read from the kernel when it is made (no buffer a forked child could
// share with its parent). Where getrandom(2) is missing (ENOSYS, kernels
// before 3.17) it reads /dev/urandom; should that fail too, an OS-seeded
// absl::BitGen (never fails an acquire for want of entropy).
std::string NewToken();

}  // namespace dlock

#endif  // DLOCK_LOCK_TOKENS_H_
