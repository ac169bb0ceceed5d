#include "dlock/fenced/redis_store_script.h"

namespace dlock {
namespace fenced {
namespace {

// See redis_store_script.h for KEYS, ARGV and the replies. Lua numbers are
// doubles: fences, values, deltas and floors stay within +-(2^53 - 1),
// where every integer is exact; the C++ side refuses larger arguments and
// the script refuses values that would leave that range.
constexpr char kFencedWrite[] = R"lua(
local limit = 9007199254740991
local fence = tonumber(ARGV[1])
local kind = redis.call('type', KEYS[1])['ok']
local highest = 0
if kind ~= 'none' then
  local raw = false
  if kind == 'string' then raw = redis.call('get', KEYS[1]) end
  if raw == false or string.match(raw, '^%d+$') == nil or #raw > 16 then
    return {'foreign', 0, kind}
  end
  highest = tonumber(raw)
end
if fence < highest then
  return {'stale', 0, string.format('%.0f', highest)}
end
local plan = {}
local a = 2
for i = 2, #KEYS do
  local op = ARGV[a]
  local t = redis.call('type', KEYS[i])['ok']
  if op == 'set' then
    if t ~= 'none' and t ~= 'string' then return {'wrongtype', i - 1, t} end
    plan[i] = {op, ARGV[a + 1], ARGV[a + 2]}
    a = a + 3
  elseif op == 'hset' then
    if t ~= 'none' and t ~= 'hash' then return {'wrongtype', i - 1, t} end
    local n = tonumber(ARGV[a + 1])
    local fields = {}
    for j = 1, 2 * n do fields[j] = ARGV[a + 1 + j] end
    plan[i] = {op, fields}
    a = a + 2 + 2 * n
  elseif op == 'incr' then
    if t ~= 'none' and t ~= 'string' then return {'wrongtype', i - 1, t} end
    local cur = 0
    if t == 'string' then
      local raw = redis.call('get', KEYS[i])
      if string.match(raw, '^%-?%d+$') == nil or #raw > 17 then
        return {'notint', i - 1, raw}
      end
      cur = tonumber(raw)
      if math.abs(cur) > limit then return {'notint', i - 1, raw} end
    end
    local new = cur + tonumber(ARGV[a + 1])
    if math.abs(new) > limit then
      return {'range', i - 1, string.format('%.0f', cur)}
    end
    if ARGV[a + 2] ~= '' and new < tonumber(ARGV[a + 2]) then
      return {'floor', i - 1, string.format('%.0f', cur)}
    end
    plan[i] = {op, ARGV[a + 1]}
    a = a + 3
  elseif op == 'del' then
    plan[i] = {op}
    a = a + 1
  else
    return redis.error_reply('ERR dlock fenced write: unknown operation ' .. tostring(op))
  end
end
if fence > highest then
  redis.call('set', KEYS[1], ARGV[1])
end
local out = {'applied', #KEYS - 1}
for i = 2, #KEYS do
  local p = plan[i]
  if p[1] == 'set' then
    if p[3] ~= '0' then
      redis.call('set', KEYS[i], p[2], 'px', p[3])
    else
      redis.call('set', KEYS[i], p[2])
    end
    out[i + 1] = 1
  elseif p[1] == 'hset' then
    out[i + 1] = redis.call('hset', KEYS[i], unpack(p[2]))
  elseif p[1] == 'incr' then
    out[i + 1] = redis.call('incrby', KEYS[i], p[2])
  else
    out[i + 1] = redis.call('del', KEYS[i])
  end
end
return out
)lua";

}  // namespace

const Script& FencedRedisWriteScript() {
  // Function-local static, never destroyed. The SHA-1 is a constant
  // (checked by redis_store_script_test against Sha1Hex), so the store
  // links no libcrypto.
  static const Script* const s =
      new Script(kFencedWrite, "df36579bcfc4651ddcc9e58d4784e62c10787671");
  return *s;
}

}  // namespace fenced
}  // namespace dlock
