// Internal to //lock:scripts: the Lua fragments every acquire script shares
// (the data-set marker and the fence base, see scripts.h), as macros that
// paste into a script's source at compile time, and the macro that defines
// a script with its constant SHA-1. Each script's SHA-1 is a constant of
// its full text, so a change here changes every acquire script's SHA-1
// (scripts_sha1_test names them).
#ifndef DLOCK_LOCK_SCRIPT_PRELUDE_H_
#define DLOCK_LOCK_SCRIPT_PRELUDE_H_

// The data-set marker (KEYS[M], ARGV[W] the restart window in ms), shared by
// both acquire scripts: read it, or create it with the server's TIME on first
// contact (Redis 7 replicates a script's effects, so TIME before a write is
// allowed). A marker younger than the window refuses the acquire:
// {'young', ms left, age ms}. A marker that is not a whole number of ms in
// [0, 9e12] is foreign data. Sets `began` (ms) for the fence base.
#define DLOCK_DATA_SET_PRELUDE(M, W) \
  "local t = redis.call('time')\n" \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "local began = redis.call('get', KEYS[" #M "])\n" \
  "if began == false then\n" \
  "  redis.call('set', KEYS[" #M "], string.format('%.0f', now))\n" \
  "  began = now\n" \
  "else\n" \
  "  local b = tonumber(began)\n" \
  "  if b == nil or b < 0 or b > 9000000000000 or b ~= math.floor(b) then\n" \
  "    return {'foreign', 'marker', began}\n" \
  "  end\n" \
  "  began = b\n" \
  "end\n" \
  "local window = tonumber(ARGV[" #W "]) or 0\n" \
  "if window > 0 and now - began < window then\n" \
  "  return {'young', window - (now - began), now - began}\n" \
  "end\n"

// Makes sure the fence counter KEYS[2] exists, starting it at began * 1000
// (0 for a trusted data set), so fences after a data-loss restart start
// above the old ones; refuses a counter with no exact successor left (Lua
// numbers are doubles: 2^53 - 1 is the last exact one): {'exhausted', value}.
#define DLOCK_FENCE_BASE \
  "local f = redis.call('get', KEYS[2])\n" \
  "if f == false then\n" \
  "  redis.call('set', KEYS[2], string.format('%.0f', began * 1000))\n" \
  "elseif tonumber(f) ~= nil and tonumber(f) >= 9007199254740991 then\n" \
  "  return {'exhausted', f}\n" \
  "end\n"

// Defines `const Script& fn()`: the script `src` with its constant SHA-1,
// built on first use and never destroyed (no static initialization or
// destruction order issues, usable from any thread).
#define DLOCK_DEFINE_SCRIPT(fn, src, sha1)               \
  const Script& fn() {                                   \
    static const Script* const s = new Script(src, sha1); \
    return *s;                                           \
  }

#endif  // DLOCK_LOCK_SCRIPT_PRELUDE_H_
