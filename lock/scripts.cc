#include "dlock/lock/scripts.h"

#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// SET NX PX and INCR of the fence in one script, after the data-set marker
// check. Anything under the lock key but a string with a TTL is foreign data
// ({'foreign', type, -1 with no TTL else 0}); a string with a TTL is another holder (nil).
// The INCR comes before the SET, so a fence key of the wrong type fails the
// script before the lock key was written (Redis scripts do not roll back).
constexpr char kAcquire[] = DLOCK_DATA_SET_PRELUDE(3, 3) "\n" DLOCK_LOCK_KEY_HELD
    DLOCK_FENCE_BASE R"lua(
local fence = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
return fence
)lua";

// Compare-and-delete, then publish the released token (so a RetryLock that
// already handed the release to a local waiter recognises its own
// notification). pcall: a key of another type (a reentrant hash) yields an
// error table, which never equals the token.
//
// Every release script publishes with pcall: a PUBLISH refused (an ACL user
// without channel permission) comes after the DEL, which a script cannot
// roll back, so the release did happen; the script then returns the
// publish error's text (a bulk string) instead of failing.
constexpr char kRelease[] = R"lua(
if redis.pcall('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  local p = redis.pcall('publish', ARGV[2], ARGV[1])
  if type(p) == 'table' then
    return tostring(p.err)
  end
  return 1
end
return 0
)lua";

// Compare-and-PEXPIRE: the key's TTL becomes ttl_ms from now (not a sum).
constexpr char kExtend[] = R"lua(
if redis.pcall('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// RedLock: extend where we still own the key, re-set it where it is gone,
// leave anyone else's (or another kind of) key alone.
constexpr char kExtendOrReacquire[] = R"lua(
local v = redis.pcall('get', KEYS[1])
if v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
if v == false then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  return 1
end
return 0
)lua";

// Owner-counted hash, after the data-set marker check (KEYS[4], ARGV[3]).
// A fresh acquire increments the fence; a re-acquire by the same owner
// increments its count and raises the TTL to ttl_ms if that is longer than
// what is left (never shortens an outer holder's lease). A re-acquire
// reports the fence of the current holding. Every counted acquire also sets
// its marker key (KEYS[3], unique per request, PX ttl) so that an acquire
// whose reply was lost can be undone exactly once (ReentrantUndo) without
// ever decrementing a hold it did not add. Anything under the lock key but
// a hash with a TTL is foreign data ({'foreign', type, -1 with no TTL else 0}).
constexpr char kReentrantAcquire[] = DLOCK_DATA_SET_PRELUDE(4, 3) R"lua(
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
)lua" DLOCK_FENCE_BASE R"lua(
  local fence = redis.call('incr', KEYS[2])
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 1, 'px', ARGV[2])
  return {1, fence}
end
local pttl = redis.call('pttl', KEYS[1])
if kind ~= 'hash' or pttl < 0 then
  return {'foreign', kind, pttl < 0 and -1 or 0}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return false
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
if pttl < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
redis.call('set', KEYS[3], 1, 'px', ARGV[2])
local fence = redis.call('get', KEYS[2])
if not fence then
  redis.call('set', KEYS[2], string.format('%.0f', began * 1000))
  fence = redis.call('incr', KEYS[2])
end
return {count, tonumber(fence)}
)lua";

// Undoes one ReentrantAcquire whose outcome is unknown: only if its marker
// exists (the acquire ran and was not undone yet) and the owner still holds.
constexpr char kReentrantUndo[] = R"lua(
if redis.call('del', KEYS[2]) == 0 then
  return 0
end
local n = redis.pcall('hget', KEYS[1], ARGV[1])
if type(n) ~= 'string' then
  return 0
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then
)lua" DLOCK_DELETE_AND_PUBLISH_RELEASED;

constexpr char kReentrantRelease[] = R"lua(
local n = redis.pcall('hget', KEYS[1], ARGV[1])
if type(n) ~= 'string' then
  return -1
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if count > 0 then
  return count
end
redis.call('del', KEYS[1])
local p = redis.pcall('publish', ARGV[2], 'released')
if type(p) == 'table' then
  return tostring(p.err)
end
return 0
)lua";

// Raises the TTL to ttl_ms if that is longer than what is left, never
// lowers it: the key covers every hold of the owner (outer and nested), and
// an inner hold's extend must not cut short an outer hold's lease.
constexpr char kReentrantExtend[] = R"lua(
local n = redis.pcall('hget', KEYS[1], ARGV[1])
if type(n) ~= 'string' then
  return 0
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return 1
)lua";

}  // namespace

// DLOCK_DEFINE_SCRIPT: script_prelude.h.
DLOCK_DEFINE_SCRIPT(AcquireScript, kAcquire, "af6950c5ff8796b6e4df930af005c7ba0f9d4c73")
DLOCK_DEFINE_LATE_SAFE_SCRIPT(ReleaseScript, kRelease, "4a7024c06869cacd04e4851399793af3c417a4d6")
DLOCK_DEFINE_SCRIPT(ExtendScript, kExtend, "71624710076548808e9a8a50d03a8bb55499c2c5")
DLOCK_DEFINE_SCRIPT(ExtendOrReacquireScript, kExtendOrReacquire, "2e97109bf58e5111535896ecbe564d6287032eb7")
DLOCK_DEFINE_SCRIPT(ReentrantAcquireScript, kReentrantAcquire, "5dc631492c34859e26a6fe9262ed1b3ec0d43213")
DLOCK_DEFINE_SCRIPT(ReentrantReleaseScript, kReentrantRelease, "fec45ffc43d415bb27c9e9a2710d3e5db0fcfe5a")
DLOCK_DEFINE_SCRIPT(ReentrantExtendScript, kReentrantExtend, "40454865f65ef1e9f9a88ad2d3e210f44f8605ce")
DLOCK_DEFINE_SCRIPT(ReentrantUndoScript, kReentrantUndo, "daa3646e32b8cce98ef39be66be824172ff1e6ba")


std::vector<NamedScript> AllScripts() {
  return {
      {"acquire", &AcquireScript(), 3},
      {"release", &ReleaseScript(), 1},
      {"extend", &ExtendScript(), 1},
      {"extend_or_reacquire", &ExtendOrReacquireScript(), 1},
      {"reentrant_acquire", &ReentrantAcquireScript(), 4},
      {"reentrant_release", &ReentrantReleaseScript(), 1},
      {"reentrant_extend", &ReentrantExtendScript(), 1},
      {"reentrant_undo", &ReentrantUndoScript(), 2},
      {"read_acquire", &ReadAcquireScript(), 5},
      {"write_acquire", &WriteAcquireScript(), 5},
      {"read_release", &ReadReleaseScript(), 1},
      {"read_extend", &ReadExtendScript(), 1},
  };
}

}  // namespace dlock
