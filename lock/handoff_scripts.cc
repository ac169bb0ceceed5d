#include "dlock/lock/handoff_scripts.h"

#include "absl/strings/str_cat.h"
#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// The part both scripts share (KEYS[2] = C:q, KEYS[3] = C:qx). An expiry in
// C:qx is positive for a waiting entry and negative (minus the expiry) for
// a granted one: handed the lock, its client's attempt on the way.
//   now       server time in ms (TIME is read before any write)
//   head()    the oldest live entry and whether it is granted, removing
//             dead entries on the way (at most 16); nil if none
//   grant(id, ch)  marks id granted for the grace and publishes "w:" id on
//             id's own channel, ch ":w:" id (only its client hears it)
//   join(id, ttl)  adds id at the tail (an entry there keeps its place) or
//             refreshes it, expiry now + ttl, and keeps both keys' TTLs at
//             least ttl
#define DLOCK_HANDOFF_QUEUE_PRELUDE \
  "local t = redis.call('time')\n" \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "local function head()\n" \
  "  for i = 1, 16 do\n" \
  "    local h = redis.call('zrange', KEYS[2], 0, 0)\n" \
  "    if h[1] == nil then return nil end\n" \
  "    local e = tonumber(redis.call('zscore', KEYS[3], h[1]))\n" \
  "    if e ~= nil and math.abs(e) > now then return h[1], e < 0 end\n" \
  "    redis.call('zrem', KEYS[2], h[1])\n" \
  "    redis.call('zrem', KEYS[3], h[1])\n" \
  "  end\n" \
  "  return nil\n" \
  "end\n" \
  "local function grant(id, ch)\n" \
  "  redis.call('zadd', KEYS[3], string.format('%.0f', -(now + " DLOCK_HANDOFF_GRACE_MS ")), id)\n" \
  "  return redis.pcall('publish', ch .. ':w:' .. id, 'w:' .. id)\n" \
  "end\n" \
  "local function join(id, ttl)\n" \
  "  if redis.call('zscore', KEYS[2], id) == false then\n" \
  "    local ticket = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
  "    local last = redis.call('zrange', KEYS[2], -1, -1, 'withscores')\n" \
  "    if last[2] ~= nil and tonumber(last[2]) >= ticket then ticket = tonumber(last[2]) + 1 end\n" \
  "    redis.call('zadd', KEYS[2], string.format('%.0f', ticket), id)\n" \
  "  end\n" \
  "  redis.call('zadd', KEYS[3], string.format('%.0f', now + ttl), id)\n" \
  "  for i = 2, 3 do\n" \
  "    if redis.call('pttl', KEYS[i]) < ttl then redis.call('pexpire', KEYS[i], ttl) end\n" \
  "  end\n" \
  "end\n"

// KEYS: lock, C:q, C:qx. ARGV: token, channel, self id, rejoin, entry ttl.
constexpr char kHandOffRelease[] = R"lua(
if redis.pcall('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
)lua" DLOCK_HANDOFF_QUEUE_PRELUDE R"lua(
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  redis.call('zrem', KEYS[2], ARGV[3])
  redis.call('zrem', KEYS[3], ARGV[3])
end
local h = head()
local p
local ret = 1
if h ~= nil then
  p = grant(h, ARGV[2])
  if ARGV[4] == '1' then
    join(ARGV[3], tonumber(ARGV[5]))
    ret = 2
  end
else
  p = redis.pcall('publish', ARGV[2], ARGV[1])
end
if type(p) == 'table' then
  return tostring(p.err)
end
return ret
)lua";

// KEYS: lock. ARGV: token, channel. ReleaseScript's work (compare, DEL,
// PUBLISH), replying 1 + the number of clients the PUBLISH reached.
constexpr char kCountingRelease[] = R"lua(
if redis.pcall('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  local p = redis.pcall('publish', ARGV[2], ARGV[1])
  if type(p) == 'table' then
    return tostring(p.err)
  end
  return 1 + p
end
return 0
)lua";

// KEYS: lock, C:q, C:qx. ARGV: waiter id, entry ttl ms, mode, channel.
constexpr char kHandOffQueue[] = DLOCK_HANDOFF_QUEUE_PRELUDE R"lua(
local id, ttl = ARGV[1], tonumber(ARGV[2])
local free = redis.call('exists', KEYS[1]) == 0
if ARGV[3] == 'leave' then
  redis.call('zrem', KEYS[2], id)
  redis.call('zrem', KEYS[3], id)
  if free then
    local h = head()
    if h ~= nil then grant(h, ARGV[4]) end
  end
  return 0
end
if free then
  local h, granted = head()
  if h == nil or h == id then
    return 0
  end
  if not granted then
    grant(h, ARGV[4])
  end
end
join(id, ttl)
return 1
)lua";

}  // namespace

std::string HandOffChannel(absl::string_view channel, absl::string_view id) {
  return absl::StrCat(channel, ":w:", id);
}

std::string HandOffQueueKey(absl::string_view channel) { return absl::StrCat(channel, ":q"); }
std::string HandOffQueueExpiryKey(absl::string_view channel) {
  return absl::StrCat(channel, ":qx");
}

DLOCK_DEFINE_LATE_SAFE_SCRIPT(HandOffReleaseScript, kHandOffRelease,
                              "81dd77d4fd16fad5a4ca9f5356763a00ede0174a")
DLOCK_DEFINE_LATE_SAFE_SCRIPT(CountingReleaseScript, kCountingRelease,
                              "e96e112efb77f415021c4418b21db6a97b5f70bd")
DLOCK_DEFINE_SCRIPT(HandOffQueueScript, kHandOffQueue, "910f5956574c1a18248a8ce4e55452ca1a183b46")

std::vector<NamedScript> HandOffScripts() {
  return {{"counting_release", &CountingReleaseScript(), 1},
          {"handoff_release", &HandOffReleaseScript(), 3},
          {"handoff_queue", &HandOffQueueScript(), 3}};
}

}  // namespace dlock
