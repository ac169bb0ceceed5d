#include "dlock/lock/scripts.h"

#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// SET NX PX and the next fence (script_prelude.h: FENCES) in one script,
// then the restart rule (only when the window is on). KEYS: lock, data-set
// marker, fence high-water mark (each present while the lock is held and
// the mark lives: no usually-absent key). The order puts the common case
// first: `SET lock token NX PX ttl GET` (nil: granted; the old value:
// refused, and only then PTTL tells a holder (TTL: nil) from foreign data
// (no TTL), and WRONGTYPE -- another type -- is foreign too), then INCR of
// the mark for the fence (DLOCK_FENCE_INCR), then the restart rule, whose
// fast path needs the fence (DLOCK_RESTART_RULE_AFTER_FENCE). A refusal
// after the SET deletes the lock key again (the script is atomic: nobody
// saw it). What it touches when the resource is free, the window off and
// the mark present: SET NX PX GET, INCR -- no TYPE, no TIME, no GET.
constexpr char kAcquire[] = R"lua(local old = redis.pcall('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2], 'get')
if old ~= false then
)lua" DLOCK_REFUSE_FOREIGN_AFTER_SET_GET R"lua(  return false
end
)lua" DLOCK_FENCE_INCR(3, 2, "redis.call('del', KEYS[1])\n")
    DLOCK_RESTART_RULE_AFTER_FENCE(2, 3, 3, "redis.call('del', KEYS[1])\n") R"lua(return fence
)lua";

// The rest of the fenced acquire after its transaction (FencedAcquireTx,
// lease_command.h: `MULTI / SET lock token NX PX ttl GET / INCR mark / GET
// marker / [TIME] / EXEC`) granted the lock key but could not prove the
// fence valid, or the window's fast path failed: the mark was missing or
// is not valid for the marker (script_prelude.h: DLOCK_FENCE_CHECK_BELOW),
// the marker is missing or foreign, INCR failed, or the data set may be
// young. KEYS as AcquireScript; ARGV: token, ttl ms, window ms, and the
// transaction's fence (INCR's reply, or empty). Our token under the lock
// key is ours (the transaction set it; tokens are never reused); a key
// gone since is set again; anything else is refused as by AcquireScript.
// Then the fence by INCR, validated with the marker ALWAYS read (a mark
// that is not valid is raised to where a missing mark starts: raising is
// always safe), and the restart rule; every refusal deletes the lock key.
// A missing marker while a mark above DLOCK_FENCE_CHECK_BELOW lives (one
// deleted by hand) is recreated as the mark's value in ms, floor((fence -
// 1) / 1000), or TIME ms if that is earlier (a mark raised above TIME):
// the mark proves the data set at least that old (it started
// at or above TIME us at its creation), the transaction can then validate
// the next fences (fence > marker x 1000), and the restart rule's full
// check on it agrees with the fast path.
// `fresh_mark`: the mark holds nothing but this INCR, or ours and the
// transaction's (1, then 2): a refusal deletes it.
constexpr char kAcquireAfterTx[] = R"lua(local old = redis.pcall('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2], 'get')
if old ~= false and old ~= ARGV[1] then
)lua" DLOCK_REFUSE_FOREIGN_AFTER_SET_GET R"lua(  return false
end
)lua" DLOCK_FENCE_INCR_AS(3, 2, "redis.call('del', KEYS[1])\n",
                         "fence == 1 or (fence == 2 and ARGV[4] == '1')", "9007199254740991",
                         DLOCK_MARKER_FROM_FENCE(2))
    DLOCK_RESTART_RULE_AFTER_FENCE(2, 3, 3, "redis.call('del', KEYS[1])\n") R"lua(return fence
)lua";

// The acquire without a fence (SimpleLockOptions / RedLockOptions::fencing
// off): SET NX PX after the restart rule (only when the window is on), no
// fence mark -- the work of a Redlock without fencing tokens. KEYS: lock,
// and the data-set marker only when the window is on (with it off the
// script never reads KEYS[2], and the caller does not name it, so no acquire
// names a usually-absent key). Replies 0 (granted, no fence), nil when held,
// or a refusal as AcquireScript's. Like it, it sends SET NX PX GET and
// pays PTTL (and TYPE) only when refused.
constexpr char kAcquireUnfenced[] = DLOCK_LAZY_DATA_SET_PRELUDE(2, 3) R"lua(
local old = redis.pcall('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2], 'get')
if old ~= false then
)lua" DLOCK_REFUSE_FOREIGN_AFTER_SET_GET R"lua(  return false
end
return 0
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

// Owner-counted hash, after the restart rule (KEYS[3], ARGV[3]). KEYS:
// lock, request marker, data-set marker, fence high-water mark. A fresh acquire issues the next fence (script_prelude.h)
// and keeps it in the hash's field '#fence' (an owner id always holds a
// ':', so no owner is named so); a re-acquire by the same owner increments
// its count and raises the TTL to ttl_ms if that is longer than what is
// left (never shortens an outer holder's lease), and reports the fence of
// the current holding ('#fence'; a holding from before it was kept there
// gets a new fence). Every counted acquire also sets its request marker
// (KEYS[2], unique per request, PX ttl) so that an acquire whose reply was
// lost can be undone exactly once (ReentrantUndo) without ever
// decrementing a hold it did not add. Anything under the lock key but a
// hash with a TTL is foreign data ({'foreign', type, -1 with no TTL else 0}).
constexpr char kReentrantAcquire[] = DLOCK_LAZY_DATA_SET_PRELUDE(3, 3) R"lua(
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
)lua" DLOCK_FENCE_INCR(4, 3, "") R"lua(
  redis.call('hset', KEYS[1], ARGV[1], 1, '#fence', string.format('%.0f', fence))
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[2], 1, 'px', ARGV[2])
  return {1, fence}
end
local pttl = redis.call('pttl', KEYS[1])
if kind ~= 'hash' or pttl < 0 then
  return {'foreign', kind, pttl < 0 and -1 or 0}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return false
end
local held = tonumber(redis.call('hget', KEYS[1], '#fence'))
if held == nil then
)lua" DLOCK_FENCE_INCR(4, 3, "") R"lua(
  held = fence
  redis.call('hset', KEYS[1], '#fence', string.format('%.0f', fence))
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
if pttl < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
return {count, held}
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
DLOCK_DEFINE_SCRIPT(AcquireScript, kAcquire, "c01d815d728a1b7b78ae727f362986cb8d48193b")
DLOCK_DEFINE_SCRIPT(AcquireAfterTxScript, kAcquireAfterTx, "71ec5eebd5342df7826744f3ba57a782cf3b0bfa")
DLOCK_DEFINE_SCRIPT(AcquireUnfencedScript, kAcquireUnfenced, "7307c3f325ab01f01381dd25b7f9b975e3917222")
DLOCK_DEFINE_LATE_SAFE_SCRIPT(ReleaseScript, kRelease, "4a7024c06869cacd04e4851399793af3c417a4d6")
DLOCK_DEFINE_SCRIPT(ExtendScript, kExtend, "71624710076548808e9a8a50d03a8bb55499c2c5")
DLOCK_DEFINE_SCRIPT(ExtendOrReacquireScript, kExtendOrReacquire, "2e97109bf58e5111535896ecbe564d6287032eb7")
DLOCK_DEFINE_SCRIPT(ReentrantAcquireScript, kReentrantAcquire, "2769565404a3086ad55d8222ef0e3598060dcfec")
DLOCK_DEFINE_SCRIPT(ReentrantReleaseScript, kReentrantRelease, "fec45ffc43d415bb27c9e9a2710d3e5db0fcfe5a")
DLOCK_DEFINE_SCRIPT(ReentrantExtendScript, kReentrantExtend, "40454865f65ef1e9f9a88ad2d3e210f44f8605ce")
DLOCK_DEFINE_SCRIPT(ReentrantUndoScript, kReentrantUndo, "daa3646e32b8cce98ef39be66be824172ff1e6ba")


std::vector<NamedScript> AllScripts() {
  return {
      {"acquire", &AcquireScript(), 3},
      {"acquire_after_tx", &AcquireAfterTxScript(), 3},
      {"acquire_unfenced", &AcquireUnfencedScript(), 2},
      {"release", &ReleaseScript(), 1},
      {"extend", &ExtendScript(), 1},
      {"extend_or_reacquire", &ExtendOrReacquireScript(), 1},
      {"reentrant_acquire", &ReentrantAcquireScript(), 4},
      {"reentrant_release", &ReentrantReleaseScript(), 1},
      {"reentrant_extend", &ReentrantExtendScript(), 1},
      {"reentrant_undo", &ReentrantUndoScript(), 2},
      {"read_acquire", &ReadAcquireScript(), 5},
      {"write_acquire", &WriteAcquireScript(), 5},
      {"write_after_tx", &WriteAfterTxScript(), 5},
      {"read_release", &ReadReleaseScript(), 1},
      {"read_extend", &ReadExtendScript(), 1},
  };
}

}  // namespace dlock
