#include "dlock/lock/semaphore_scripts.h"

#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// The trim of the permits expired by `now` (the server's time in ms).
#define DLOCK_SEMAPHORE_TRIM_EXPIRED \
  "redis.call('zremrangebyscore', KEYS[1], '-inf', string.format('%.0f', now))\n"

// The opening of release and extend: a key of another kind holds no holder
// (0); then the server's time in ms (`now`) and the trim of expired permits.
#define DLOCK_SEMAPHORE_HOLDERS \
  "\nif redis.call('type', KEYS[1])['ok'] ~= 'zset' then\n" \
  "  return 0\n" \
  "end\n" \
  DLOCK_SERVER_NOW DLOCK_SEMAPHORE_TRIM_EXPIRED

// The set's key TTL: until the latest expiry + 1 ms.
#define DLOCK_SEMAPHORE_KEY_TTL \
  "local last = redis.call('zrange', KEYS[1], -1, -1, 'withscores')\n" \
  "redis.call('pexpire', KEYS[1], string.format('%.0f', tonumber(last[2]) - now + 1))\n"

// After the data-set marker check (which sets `now`): anything but a sorted
// set under the key is foreign data; trim; full when ARGV[4] permits hold;
// the fence is read before the ZADD, so a bad mark fails the script before
// the set was written. KEYS: set, data-set marker, fence
// high-water mark (script_prelude.h).
constexpr char kSemaphoreAcquire[] = DLOCK_DATA_SET_PRELUDE(2, 3) R"lua(
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then
  local pttl = redis.call('pttl', KEYS[1])
  return {'foreign', kind, pttl < 0 and -1 or 0}
end
)lua" DLOCK_SEMAPHORE_TRIM_EXPIRED R"lua(if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[4]) then
  return false
end
)lua" DLOCK_FENCE_INCR(3, 2, "") R"lua(
redis.call('zadd', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
)lua" DLOCK_SEMAPHORE_KEY_TTL R"lua(
return fence
)lua";

// Remove-if-holder, then publish the token (RetryLock tells its own
// releases' notifications by it). A key of another kind: not a holder.
// pcall on PUBLISH: see scripts.h (a refused PUBLISH after the ZREM).
constexpr char kSemaphoreRelease[] = DLOCK_SEMAPHORE_HOLDERS R"lua(
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local p = redis.pcall('publish', ARGV[2], ARGV[1])
if type(p) == 'table' then
  return tostring(p.err)
end
return 1
)lua";

// A live holder's expiry becomes now + ttl (not a sum; may shorten it).
constexpr char kSemaphoreExtend[] = DLOCK_SEMAPHORE_HOLDERS R"lua(
if redis.call('zscore', KEYS[1], ARGV[1]) == false then
  return 0
end
redis.call('zadd', KEYS[1], 'xx', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
)lua" DLOCK_SEMAPHORE_KEY_TTL R"lua(
return 1
)lua";

#undef DLOCK_SEMAPHORE_KEY_TTL
#undef DLOCK_SEMAPHORE_HOLDERS
#undef DLOCK_SEMAPHORE_TRIM_EXPIRED

}  // namespace

// Constant SHA-1s, as in scripts.cc (scripts_sha1_test checks them).
DLOCK_DEFINE_SCRIPT(SemaphoreAcquireScript, kSemaphoreAcquire, "c9c151de076d75cb91dbfcdfe15c411029b35b44")
DLOCK_DEFINE_SCRIPT(SemaphoreReleaseScript, kSemaphoreRelease, "4544bc9156b20e8a1022c78e1abbe6b1590e2696")
DLOCK_DEFINE_SCRIPT(SemaphoreExtendScript, kSemaphoreExtend, "bcbee1dbc027d453d0cef1795c68e3c9df1aac6a")

std::vector<NamedScript> SemaphoreScripts() {
  return {
      {"semaphore_acquire", &SemaphoreAcquireScript(), 3},
      {"semaphore_release", &SemaphoreReleaseScript(), 1},
      {"semaphore_extend", &SemaphoreExtendScript(), 1},
  };
}

}  // namespace dlock
