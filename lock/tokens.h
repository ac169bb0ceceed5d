// This header defines `NewToken()`: the random tokens of leases and owners.
#ifndef DLOCK_LOCK_TOKENS_H_
#define DLOCK_LOCK_TOKENS_H_

#include <string>

namespace dlock {

// A fresh random token: 128 bits from OpenSSL's OS-seeded CSPRNG, as 32
// lower-case hex characters. Thread-safe. Bytes are drawn 64 tokens at a time
// into a thread-local buffer that is discarded in the child of fork(), so a
// forked worker never repeats its parent's tokens (a raw clone(2) that skips
// pthread_atfork handlers is not covered).
std::string NewToken();

}  // namespace dlock

#endif  // DLOCK_LOCK_TOKENS_H_
