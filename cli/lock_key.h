// This header defines how `dlock status` and `dlock unlock` read a lock key:
// one atomic snapshot (script) of the lock key's type, PTTL and value and of
// the resource's fencing counter, and its one-line description. A token is a
// bearer credential (whoever knows it can release or extend the lock), so
// only a prefix of at most 8 characters is ever printed.
#ifndef DLOCK_CLI_LOCK_KEY_H_
#define DLOCK_CLI_LOCK_KEY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock_commands.h"

namespace dlock {
namespace cli {

struct KeySnapshot {
  // Redis TYPE of the lock key: "none" (free), "string" (a SimpleLock or
  // RedLock token), "hash" (ReentrantLock owners), or anything else
  // (foreign data: not written by dlock).
  std::string type;
  int64_t pttl = -2;          // PTTL: -1 no expiry, -2 no key
  // The last fence issued for the resource's server (slot): its fence
  // high-water mark; "none" if unset. The next holder's fence is above it.
  std::string fence = "none";
  std::string token;           // type "string": the value
  int64_t owners = 0;          // type "hash": number of owners
  // type "zset" (a Semaphore): the live permits, {token, ms left}, soonest
  // expiry first.
  std::vector<std::pair<std::string, int64_t>> permits;

  bool free() const { return type == "none"; }
  // Held by someone: a lock key, or a semaphore with live permits.
  bool held() const { return !free() && (type != "zset" || !permits.empty()); }
  // A key dlock's scripts can have written (string or reentrant hash).
  bool is_lock() const { return type == "string" || type == "hash"; }
};

// `keys` for server `i` of `session`: one data-set marker and fence mark
// per slot when it is a Redis Cluster (keys.h).
KeyScheme ServerKeys(Session& session, size_t i, const KeyScheme& keys);

// Reads the snapshot from server `i` of `session`. An error reply or an
// unreachable server is a non-OK status.
absl::StatusOr<KeySnapshot> ReadLockKey(Session& session, size_t i,
                                        const KeyScheme& keys,
                                        const std::string& resource);

// "free, fence 3", "held, expires in 29.9s, fence 3, token 01234567...",
// "held (reentrant, 2 owners), expires in ..., fence 3",
// "semaphore, 2 permits held, fence 7" + one line per permit (token prefix,
// expiry),
// "key holds a list (foreign data), NO EXPIRY ...".
std::string DescribeKey(const KeySnapshot& key);

// The first 8 characters of a token (C-escaped) followed by "...", or
// "(short token)" for a token of 8 characters or less.
std::string ShortToken(const std::string& token);

// "expires in 29.9s" or "NO EXPIRY (not set by dlock?)".
std::string DescribeTtl(int64_t pttl_ms);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_LOCK_KEY_H_
