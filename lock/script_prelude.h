// This header defines the Lua fragments several dlock scripts share (the
// server's time, the data-set marker check and the fence counter's base),
// as macros that expand to string literals, so each script stays one
// constant whose SHA-1 is known at compile time, and the macro that defines
// a script's accessor. Internal to //lock:scripts (scripts.cc,
// fair_scripts.cc, read_write_scripts.cc, semaphore_scripts.cc).
#ifndef DLOCK_LOCK_SCRIPT_PRELUDE_H_
#define DLOCK_LOCK_SCRIPT_PRELUDE_H_

// The server's time in ms (TIME), as the local `now`.
#define DLOCK_SERVER_NOW \
  "local t = redis.call('time')\n" \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

// The data-set marker (KEYS[M], ARGV[W] the restart window in ms), shared by
// both acquire scripts: read it, or create it with the server's TIME on first
// contact (Redis 7 replicates a script's effects, so TIME before a write is
// allowed). A marker younger than the window refuses the acquire:
// {'young', ms left, age ms}. A marker that is not a whole number of ms in
// [0, 9e12] is foreign data. Sets `began` (ms) for the fence base.
#define DLOCK_DATA_SET_PRELUDE(M, W) \
  DLOCK_SERVER_NOW \
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

// The lock key KEYS[1] (a string with a PX TTL when held), as `kind` (its
// TYPE): anything but a string with a TTL is foreign data, refused with
// {'foreign', type, -1 with no TTL else 0}.
//   DLOCK_LOCK_KEY_HELD: a holder (a string with a TTL) makes the script
//   return nil (false); the script goes on only when the key is free.
//   DLOCK_LOCK_KEY_CHECK: opens `if kind ~= 'none' then`, leaving the held
//   case (a string with a TTL) to the script, which closes the block.
#define DLOCK_LOCK_KEY_CHECK \
  "local kind = redis.call('type', KEYS[1])['ok']\n" \
  "if kind ~= 'none' then\n" \
  "  local pttl = redis.call('pttl', KEYS[1])\n" \
  "  if kind ~= 'string' or pttl < 0 then\n" \
  "    return {'foreign', kind, pttl < 0 and -1 or 0}\n" \
  "  end\n"
#define DLOCK_LOCK_KEY_HELD \
  "local kind = redis.call('type', KEYS[1])['ok']\n" \
  "if kind ~= 'none' then\n" \
  "  local pttl = redis.call('pttl', KEYS[1])\n" \
  "  if kind == 'string' and pttl >= 0 then\n" \
  "    return false\n" \
  "  end\n" \
  "  return {'foreign', kind, pttl < 0 and -1 or 0}\n" \
  "end\n"

// Ends a release script's `if <the last hold is gone> then` block: deletes
// KEYS[1], publishes "released" on ARGV[2] (pcall: a refused PUBLISH
// returns its error text, the delete stands), and returns 1.
#define DLOCK_DELETE_AND_PUBLISH_RELEASED \
  "  redis.call('del', KEYS[1])\n" \
  "  local p = redis.pcall('publish', ARGV[2], 'released')\n" \
  "  if type(p) == 'table' then\n" \
  "    return tostring(p.err)\n" \
  "  end\n" \
  "end\n" \
  "return 1\n"

// Defines `const Script& fn()` for the script `src` with the constant
// `sha1`. Function-local statics: built on first use, never destroyed (no
// static initialization or destruction order issues, usable from any
// thread). Each script's SHA-1 is a constant, so the core needs no hash
// code (and no libcrypto). After editing a script, lock:scripts_sha1_test
// fails and prints the new value; tests/lock:scripts_sha1_real_test checks
// them against a real server's SCRIPT LOAD.
#define DLOCK_DEFINE_SCRIPT(fn, src, sha1)                \
  const Script& fn() {                                    \
    static const Script* const s = new Script(src, sha1); \
    return *s;                                            \
  }
// The same for a script that may run later than commands sent after it
// (Script::LateRun::kSafe): a compare-and-delete by the lease's own token.
#define DLOCK_DEFINE_LATE_SAFE_SCRIPT(fn, src, sha1)                               \
  const Script& fn() {                                                             \
    static const Script* const s = new Script(src, sha1, Script::LateRun::kSafe); \
    return *s;                                                                     \
  }

#endif  // DLOCK_LOCK_SCRIPT_PRELUDE_H_
