#include "dlock/lock/read_write_scripts.h"

#include "absl/strings/str_cat.h"
#include "dlock/lock/script_prelude.h"

namespace dlock {
namespace {

// Trims the readers hash KEYS[K]: deletes every entry whose expiry is not
// after `now` (or is not a number), and sets `live` (entries left) and
// `last` (their latest expiry, 0 if none).
#define DLOCK_TRIM_READERS(K) \
  "local live, last = 0, 0\n" \
  "local rs = redis.call('hgetall', KEYS[" #K "])\n" \
  "for i = 1, #rs, 2 do\n" \
  "  local e = tonumber(rs[i + 1])\n" \
  "  if e == nil or e <= now then\n" \
  "    redis.call('hdel', KEYS[" #K "], rs[i])\n" \
  "  else\n" \
  "    live = live + 1\n" \
  "    if e > last then last = e end\n" \
  "  end\n" \
  "end\n"

// KEYS of both acquires: lock, readers, intent, data-set marker, fence
// high-water mark.
//
// A reader gets in unless a writer holds the lock key (a string with a
// TTL; anything else there is foreign data) or the writer-intent marker
// exists (a writer is waiting: no writer starvation). It returns the
// server's last fence (the mark: >= the fence of every writer before it,
// < the fence of every writer after it), storing the mark only when it was
// missing (script_prelude.h).
constexpr char kReadAcquire[] = DLOCK_DATA_SET_PRELUDE(4, 3) "\n" DLOCK_LOCK_KEY_HELD R"lua(if redis.call('exists', KEYS[3]) == 1 then
  return false
end
)lua" DLOCK_TRIM_READERS(2) DLOCK_FENCE_LAST(5, 4) R"lua(
local expiry = now + tonumber(ARGV[2])
redis.call('hset', KEYS[2], ARGV[1], string.format('%.0f', expiry))
if expiry > last then last = expiry end
redis.call('pexpire', KEYS[2], string.format('%.0f', last - now))
local fence = hwm
if not stored then
)lua" DLOCK_FENCE_COMMIT(5) R"lua(end
return fence
)lua";

// A writer gets in when neither a writer (or plain holder) nor a live
// reader holds. What it touches on a free resource with no readers and the
// window off: EXISTS readers, SET NX PX GET, INCR mark, DEL intent -- no
// TYPE, no HGETALL, no TIME, no GET. Readers are trimmed (HGETALL, TIME)
// only when their hash exists. When it cannot get in, it (re)sets the
// writer-intent marker to its token for intent_ms (0: not at all), which
// keeps new readers out while it waits; a writer that stops trying lets it
// expire. On success it takes the lock key exactly as the plain acquire
// does (SET NX PX GET, then the fence by INCR, then the restart rule with
// its fast path, a refusal deleting the lock key again: scripts.cc) and
// deletes the marker (each attempt has a fresh token, so the marker cannot
// tell whose it is; another waiting writer sets it again at its next
// attempt, which fails while this writer holds).
// The writer's acquire, shared by WriteAcquireScript and WriteAfterTxScript
// (KEYS: lock, readers, intent, data-set, mark; ARGV[4] intent_ms):
// DLOCK_WRITER_HEAD sets `busy` (live readers, trimmed) and opens `if busy
// then`; DLOCK_WRITER_HELD refuses foreign data under the lock key when
// busy, else SETs it (`old`), leaving the `else` block open;
// DLOCK_WRITER_REFUSE returns false (after the foreign check of a refused
// SET) when busy or held, (re)setting the intent for intent_ms.
#define DLOCK_WRITER_HEAD \
  "local busy = false\n" \
  "if redis.call('exists', KEYS[2]) == 1 then\n" \
  DLOCK_SERVER_NOW DLOCK_TRIM_READERS(2) "\n" \
  "  busy = live > 0\n" \
  "end\n" \
  "local old = false\n" \
  "if busy then\n"
#define DLOCK_WRITER_HELD \
  "  local kind = redis.call('type', KEYS[1])['ok']\n" \
  "  if kind ~= 'none' then\n" \
  "    local pttl = redis.call('pttl', KEYS[1])\n" \
  "    if kind ~= 'string' or pttl < 0 then\n" \
  "      return {'foreign', kind, pttl < 0 and -1 or 0}\n" \
  "    end\n" \
  "  end\n" \
  "else\n" \
  "  old = redis.pcall('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2], 'get')\n"
#define DLOCK_WRITER_REFUSE \
  "if busy or old ~= false then\n" \
  "  if old ~= false then\n" \
  DLOCK_REFUSE_FOREIGN_AFTER_SET_GET \
  "  end\n" \
  "  if tonumber(ARGV[4]) > 0 then\n" \
  "    redis.call('set', KEYS[3], ARGV[1], 'px', ARGV[4])\n" \
  "  end\n" \
  "  return false\n" \
  "end\n"

constexpr char kWriteAcquire[] = DLOCK_WRITER_HEAD DLOCK_WRITER_HELD "end\n" DLOCK_WRITER_REFUSE
    DLOCK_FENCE_INCR(5, 4, "redis.call('del', KEYS[1])\n")
    DLOCK_RESTART_RULE_AFTER_FENCE(4, 3, 5, "redis.call('del', KEYS[1])\n") R"lua(redis.call('del', KEYS[3])
return fence
)lua";

// The writer's rare path after its transaction (write_acquire_tx.h:
// MULTI / SET lock NX PX GET / EXISTS readers intent / INCR mark / GET
// marker / [TIME] / EXEC), run when that transaction could not decide:
// live readers or an intent to clear, a refused SET, a mark or marker not
// valid, a young data set. KEYS as WriteAcquireScript; ARGV: token, ttl_ms,
// window_ms, intent_ms, and the transaction's fence (INCR's reply, "0" if
// none). The lock key may hold our own token (the transaction's SET): it
// counts as ours, and is deleted again when live readers refuse us (nobody
// was granted in between: our key kept writers and readers out). Otherwise
// WriteAcquireScript's decisions, in its order; the transaction's INCR
// stays (fences need only rise) and a mark it created is handled as
// AcquireAfterTxScript does (scripts.cc).
constexpr char kWriteAfterTx[] = DLOCK_WRITER_HEAD
    "  if redis.pcall('get', KEYS[1]) == ARGV[1] then\n"
    "    redis.call('del', KEYS[1])\n"
    "  end\n" DLOCK_WRITER_HELD
    "  if old == ARGV[1] then old = false end\n"
    "end\n" DLOCK_WRITER_REFUSE
    DLOCK_FENCE_INCR_AS(5, 4, "redis.call('del', KEYS[1])\n",
                        "fence == 1 or (fence == 2 and ARGV[5] == '1')", "9007199254740991",
                        DLOCK_MARKER_FROM_FENCE(4))
    DLOCK_RESTART_RULE_AFTER_FENCE(4, 3, 5, "redis.call('del', KEYS[1])\n") R"lua(redis.call('del', KEYS[3])
return fence
)lua";

// Deletes the reader's entry if it is live; when no live reader is left,
// deletes the hash and publishes 'released' (waking waiting writers).
constexpr char kReadRelease[] = DLOCK_SERVER_NOW R"lua(
local e = redis.pcall('hget', KEYS[1], ARGV[1])
if type(e) ~= 'string' or (tonumber(e) or 0) <= now then
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
)lua" DLOCK_TRIM_READERS(1) R"lua(
if live == 0 then
)lua" DLOCK_DELETE_AND_PUBLISH_RELEASED;

// Sets a live reader's expiry to now + ttl_ms and the hash's TTL to the
// latest expiry left.
constexpr char kReadExtend[] = DLOCK_SERVER_NOW R"lua(
local e = redis.pcall('hget', KEYS[1], ARGV[1])
if type(e) ~= 'string' or (tonumber(e) or 0) <= now then
  return 0
end
redis.call('hset', KEYS[1], ARGV[1], string.format('%.0f', now + tonumber(ARGV[2])))
)lua" DLOCK_TRIM_READERS(1) R"lua(
redis.call('pexpire', KEYS[1], string.format('%.0f', last - now))
return 1
)lua";

#undef DLOCK_WRITER_REFUSE
#undef DLOCK_WRITER_HELD
#undef DLOCK_WRITER_HEAD
#undef DLOCK_TRIM_READERS

}  // namespace

// DLOCK_DEFINE_SCRIPT: script_prelude.h.
DLOCK_DEFINE_SCRIPT(ReadAcquireScript, kReadAcquire, "78696f7c4455447016cf200bb5996502e5f450bd")
DLOCK_DEFINE_SCRIPT(WriteAcquireScript, kWriteAcquire, "97a9fe946a1a18c0085e99696fc553129b97adcd")
DLOCK_DEFINE_SCRIPT(WriteAfterTxScript, kWriteAfterTx, "58711c3260d6102833662c28fd29b5bc445cdc95")
DLOCK_DEFINE_SCRIPT(ReadReleaseScript, kReadRelease, "c0471b4503aa79e3f06e695adce151d389997ae3")
DLOCK_DEFINE_SCRIPT(ReadExtendScript, kReadExtend, "cb823b2f5a6ff50e4597c59e9ac8e985140cb2f0")


std::string ReadersKey(const KeyScheme& keys, absl::string_view resource) {
  return absl::StrCat(keys.LockKey(resource), ":readers");
}

std::string WriterIntentKey(const KeyScheme& keys, absl::string_view resource) {
  return absl::StrCat(keys.LockKey(resource), ":writer-waiting");
}

}  // namespace dlock
