#include "dlock/lock/fair_scripts.h"

#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// Reads the queue hash KEYS[Q] at server time `now` (ms): deletes expired
// entries and sets `head` (the live waiter with the lowest ticket, or
// false), `mine` (ticket of waiter W, or false), `tickets` (waiter ->
// ticket of every live entry) and `live` (how many). An entry that is not
// "ticket:expiry" is foreign data.
#define DLOCK_FAIR_QUEUE_SCAN(Q, W) \
  "local q = redis.call('hgetall', KEYS[" #Q "])\n" \
  "local head, head_ticket, mine, live, tickets = false, 0, false, 0, {}\n" \
  "for i = 1, #q, 2 do\n" \
  "  local w, v = q[i], q[i + 1]\n" \
  "  if w ~= '#next' then\n" \
  "    local sep = string.find(v, ':', 1, true)\n" \
  "    local ticket = sep and tonumber(string.sub(v, 1, sep - 1))\n" \
  "    local expiry = sep and tonumber(string.sub(v, sep + 1))\n" \
  "    if ticket == nil or expiry == nil then\n" \
  "      return {'foreign', 'queue', 0}\n" \
  "    end\n" \
  "    if expiry <= now then\n" \
  "      redis.call('hdel', KEYS[" #Q "], w)\n" \
  "    else\n" \
  "      live = live + 1\n" \
  "      tickets[w] = ticket\n" \
  "      if w == " W " then mine = ticket end\n" \
  "      if head == false or ticket < head_ticket then\n" \
  "        head, head_ticket = w, ticket\n" \
  "      end\n" \
  "    end\n" \
  "  end\n" \
  "end\n" \
  "if live == 0 and #q > 0 then redis.call('del', KEYS[" #Q "]) end\n"

// Publishes `head` on its instance's channel (prefix P .. the id before the
// first ':'); sets `perr` to the PUBLISH error's text if it was refused.
#define DLOCK_FAIR_NOTIFY_HEAD(P) \
  "local perr = false\n" \
  "local function notify(w)\n" \
  "  local p = redis.pcall('publish', " P " .. string.match(w, '^[^:]*'), w)\n" \
  "  if type(p) == 'table' then perr = tostring(p.err) end\n" \
  "end\n"

constexpr char kFairAcquire[] = DLOCK_DATA_SET_PRELUDE(2, 3)
    DLOCK_FAIR_QUEUE_SCAN(3, "ARGV[4]") DLOCK_FAIR_NOTIFY_HEAD("ARGV[6]") R"lua(
local member = ARGV[4]
)lua" DLOCK_LOCK_KEY_CHECK R"lua(end
if kind == 'none' and (head == false or head == member) then
)lua" DLOCK_FENCE_INCR(4, 2, "") R"lua(
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  if mine then
    if live == 1 then
      redis.call('del', KEYS[3])
    else
      redis.call('hdel', KEYS[3], member)
    end
  end
  return fence
end
local position = 0
if member ~= '' then
  local qttl = tonumber(ARGV[5])
  if mine == false then
    mine = redis.call('hincrby', KEYS[3], '#next', 1)
    live = live + 1
  end
  redis.call('hset', KEYS[3], member,
             string.format('%.0f:%.0f', mine, now + qttl))
  if redis.call('pttl', KEYS[3]) < qttl then
    redis.call('pexpire', KEYS[3], qttl)
  end
  position = 1
  for w, t in pairs(tickets) do
    if t < mine then position = position + 1 end
  end
end
if kind == 'none' and head ~= false and head ~= member then
  notify(head)
end
return {'queued', position, live}
)lua";

constexpr char kFairRelease[] = R"lua(
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local released = 0
if redis.pcall('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  released = 1
end
if ARGV[2] ~= '' then
  redis.call('hdel', KEYS[2], ARGV[2])
end
if redis.call('exists', KEYS[1]) == 1 then
  return released
end
)lua" DLOCK_FAIR_QUEUE_SCAN(2, "''") DLOCK_FAIR_NOTIFY_HEAD("ARGV[3]") R"lua(
if head ~= false then
  notify(head)
  if perr and released == 1 then
    return perr
  end
end
return released
)lua";

#undef DLOCK_FAIR_NOTIFY_HEAD
#undef DLOCK_FAIR_QUEUE_SCAN

}  // namespace

// SHA-1 constants as in scripts.cc: lock:fair_lock_test checks them.
const Script& FairAcquireScript() {
  static const Script* const s =
      new Script(kFairAcquire, "1437ad8ccf4d7376952ed70de577978580c76153");
  return *s;
}

const Script& FairReleaseScript() {
  static const Script* const s =
      new Script(kFairRelease, "1d6a9c49849c44741b1ac021bbdd894adcb3434a");
  return *s;
}

std::vector<NamedScript> FairScripts() {
  return {
      {"fair_acquire", &FairAcquireScript(), 4},
      {"fair_release", &FairReleaseScript(), 2},
  };
}

}  // namespace dlock
