#include "dlock/lock/scripts.h"

namespace dlock {
namespace {

// SET NX PX and INCR of the fence in one script. The existence check comes
// first and the INCR before the SET, so a fence key of the wrong type fails
// the script before anything was written (Redis scripts do not roll back).
constexpr char kAcquire[] = R"lua(
if redis.call('exists', KEYS[1]) == 1 then
  return false
end
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

// Owner-counted hash. A fresh acquire increments the fence; a re-acquire by
// the same owner increments its count and raises the TTL to ttl_ms if that
// is longer than what is left (never shortens an outer holder's lease).
// A re-acquire reports the fence of the current holding. Every counted
// acquire also sets its marker key (KEYS[3], unique per request, PX ttl) so
// that an acquire whose reply was lost can be undone exactly once
// (ReentrantUndo) without ever decrementing a hold it did not add.
constexpr char kReentrantAcquire[] = R"lua(
if redis.call('exists', KEYS[1]) == 0 then
  local fence = redis.call('incr', KEYS[2])
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 1, 'px', ARGV[2])
  return {1, fence}
end
local n = redis.pcall('hget', KEYS[1], ARGV[1])
if type(n) ~= 'string' then
  return false
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
redis.call('set', KEYS[3], 1, 'px', ARGV[2])
local fence = redis.call('get', KEYS[2])
if not fence then
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
  redis.call('del', KEYS[1])
  local p = redis.pcall('publish', ARGV[2], 'released')
  if type(p) == 'table' then
    return tostring(p.err)
  end
end
return 1
)lua";

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

// Function-local statics: built on first use, never destroyed (no static
// initialization or destruction order issues, usable from any thread).
#define DLOCK_DEFINE_SCRIPT(fn, src)           \
  const Script& fn() {                         \
    static const Script* const s = new Script(src); \
    return *s;                                 \
  }

DLOCK_DEFINE_SCRIPT(AcquireScript, kAcquire)
DLOCK_DEFINE_SCRIPT(ReleaseScript, kRelease)
DLOCK_DEFINE_SCRIPT(ExtendScript, kExtend)
DLOCK_DEFINE_SCRIPT(ExtendOrReacquireScript, kExtendOrReacquire)
DLOCK_DEFINE_SCRIPT(ReentrantAcquireScript, kReentrantAcquire)
DLOCK_DEFINE_SCRIPT(ReentrantReleaseScript, kReentrantRelease)
DLOCK_DEFINE_SCRIPT(ReentrantExtendScript, kReentrantExtend)
DLOCK_DEFINE_SCRIPT(ReentrantUndoScript, kReentrantUndo)

#undef DLOCK_DEFINE_SCRIPT

std::vector<NamedScript> AllScripts() {
  return {
      {"acquire", &AcquireScript(), 2},
      {"release", &ReleaseScript(), 1},
      {"extend", &ExtendScript(), 1},
      {"extend_or_reacquire", &ExtendOrReacquireScript(), 1},
      {"reentrant_acquire", &ReentrantAcquireScript(), 3},
      {"reentrant_release", &ReentrantReleaseScript(), 1},
      {"reentrant_extend", &ReentrantExtendScript(), 1},
      {"reentrant_undo", &ReentrantUndoScript(), 2},
  };
}

}  // namespace dlock
