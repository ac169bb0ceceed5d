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

// The restart rule (KEYS[M] the data-set marker, ARGV[W] the restart
// window in ms), for a script that has set `now` (ms). Only with a window
// > 0 (a window of 0 costs nothing: the marker is not read): read the
// marker, or create it with `now` on first contact (Redis 7 replicates a
// script's effects, so TIME before a write is allowed). A marker younger
// than the window refuses the acquire: {'young', ms left, age ms}. A marker
// that is not a whole number of ms in [0, 9e12] is foreign data.
#define DLOCK_RESTART_RULE(M, W) \
  "local window = tonumber(ARGV[" #W "]) or 0\n" \
  "if window > 0 then\n" \
  "  local began = redis.call('get', KEYS[" #M "])\n" \
  "  if began == false then\n" \
  "    redis.call('set', KEYS[" #M "], string.format('%.0f', now))\n" \
  "    began = now\n" \
  "  else\n" \
  "    local b = tonumber(began)\n" \
  "    if b == nil or b < 0 or b > 9000000000000 or b ~= math.floor(b) then\n" \
  "      return {'foreign', 'marker', began}\n" \
  "    end\n" \
  "    began = b\n" \
  "  end\n" \
  "  if now - began < window then\n" \
  "    return {'young', window - (now - began), now - began}\n" \
  "  end\n" \
  "end\n"

// `now` from TIME, then the restart rule: for scripts that need the time
// anyway (readers' and queue expiries, permits).
#define DLOCK_DATA_SET_PRELUDE(M, W) DLOCK_SERVER_NOW DLOCK_RESTART_RULE(M, W)

// The restart rule for scripts that need the time only for it: TIME is read
// only when the window is on; `now` stays false otherwise.
#define DLOCK_LAZY_DATA_SET_PRELUDE(M, W) \
  "local now = false\n" \
  "if (tonumber(ARGV[" #W "]) or 0) > 0 then\n" \
  "  local t = redis.call('time')\n" \
  "  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "end\n" \
  DLOCK_RESTART_RULE(M, W)

// FENCES (every acquire script). One high-water mark per server (per slot
// on a Cluster), KEYS[H] = P"fence-hwm" (keys.h): the last fence issued
// there, for any resource. An acquire issues fence = hwm + 1 and stores it
// (hwm := fence). Fences therefore rise strictly on the server, so per
// resource, whatever happens to the lock key (expiry, release) and however
// the server's clock moves while the mark survives. Nothing per resource
// outlives a release: N resources leave this one key (and the marker).
// No acquire names a key that is usually absent (on a Cluster slot being
// migrated, a script whose keys are partly present is answered TRYAGAIN):
// its keys are the resource's own, the marker and the mark.
//
// A missing mark (first use, FLUSHALL, a restart without persistence, a
// failover to a replica that had not received it, an upgrade from the
// per-resource counters) starts from:
//   - a trusted marker ("0", TrustDataSetCommand): 0 (fences from 1) -- a
//     trusted data set is complete, so no fence was issued there before
//     (an upgraded trusted data set runs `dlock upgrade-fences` first:
//     docs/fences.md);
//   - otherwise the server's TIME in microseconds, or the marker x 1000 if
//     that is larger (a clock stepped back behind the marker); a missing
//     marker is created with TIME in ms, as on first contact.
// ASSUMPTION on TIME (what makes a lost mark safe): every fence this
// server issued before the loss is <= its TIME in us when issued. True
// for the mark, which starts at or below TIME in us and rises by 1 per
// fence, each a script run taking well over 1 us of a server that runs one
// script at a time; and for dlock <= 0.x's per-resource counters, which
// started at the marker (ms, at or below TIME) x 1000 and rose by 1 per
// acquire, so an upgrade needs no per-resource key. It also needs TIME not
// to step back across the loss by more than the slack this leaves (TIME in
// us minus the mark, which only grows between losses: a busy server
// issuing 100k fences per second keeps 90% of the elapsed time as slack).
// A backwards step while the mark survives is harmless (hwm + 1). A data
// set declared trusted after a data loss breaks this (see keys.h).
// RedLock raises a lagging server's mark to the lease's fence
// (redlock/fence_sync.h: counters of different servers are compared, so
// their clocks must agree within that slack); a server that lost data does
// not vote for the restart window, after which its TIME is far beyond any
// fence of its peers.
//
// Refusals: a mark that is not an integer returns INCR's error ("value is
// not an integer or out of range"; a hash: WRONGTYPE) and takes nothing;
// one at 2^53 - 1 or above (Lua numbers are doubles: the last exact
// successor) is {'exhausted', value, its key}.
//
// A mark that a transaction's INCR recreated (FencedAcquireTx,
// lease_command.h: the plain exclusive acquire is `MULTI / SET NX PX GET /
// INCR mark / GET marker / EXEC`, which INCRs the mark whether it exists
// or not) holds the number of INCRs since it was lost, so "INCR answered
// 1" no longer tells a missing mark. What does: a mark is VALID when the
// marker is "0" (trusted: marks start at 0) or the mark is at least the
// marker x 1000 (a mark starts at max(TIME us, marker x 1000) and only
// grows); an invalid one is raised to where a missing mark starts
// (raising is always safe: fences need only rise). Scripts read the
// marker for this only when the mark is at most DLOCK_FENCE_CHECK_BELOW
// (2^50, about 2005 in Unix us): every mark started from a real clock is
// above it, so the common acquire reads no marker, and a recreated mark
// would need 2^50 INCRs (357 years at 100k a second) to pass it unseen.
// Under a trusted marker fences stay below it, and each acquire reads the
// marker (a GET).
#define DLOCK_FENCE_CHECK_BELOW "1125899906842624"

// Every acquire that issues a fence does it with DLOCK_FENCE_INCR (below):
// INCR of the mark, one command where the mark exists. The fragments here
// are for the scripts that read the mark without issuing a fence (the
// reader's acquire, RedLock's RaiseFence, and the CLI's forced unlock,
// which bumps the mark off the hot path):
// DLOCK_FENCE_LAST(H, M) reads and sets `hwm` (the last fence: the mark or
// its start) and `stored` (the mark as stored; false if missing, or if it
// was not valid for the marker -- recreated by INCRs, see
// DLOCK_FENCE_CHECK_BELOW -- so that the caller stores the new start);
// writes nothing but a missing marker. DLOCK_FENCE_NEXT adds `fence` = hwm + 1.
// DLOCK_FENCE_COMMIT(H) stores the mark. Between them the script decides
// whether it grants.
#define DLOCK_FENCE_LAST(H, M) \
  "local stored = redis.call('get', KEYS[" #H "])\n" \
  "local hwm = stored and tonumber(stored)\n" \
  "if stored and (hwm == nil or hwm ~= math.floor(hwm)) then\n" \
  "  return redis.error_reply('ERR value is not an integer or out of range')\n" \
  "end\n" \
  "local m = false\n" \
  "local b = 0\n" \
  "if not hwm or hwm <= " DLOCK_FENCE_CHECK_BELOW " then\n" \
  "  m = redis.call('get', KEYS[" #M "])\n" \
  "  if m ~= false then\n" \
  "    b = tonumber(m)\n" \
  "    if b == nil or b < 0 or b > 9000000000000 or b ~= math.floor(b) then\n" \
  "      return {'foreign', 'marker', m}\n" \
  "    end\n" \
  "  end\n" \
  "  if hwm and (m == false or (b ~= 0 and hwm < b * 1000)) then hwm = false end\n" \
  "end\n" \
  "if not hwm then\n" \
  "  if m ~= false and b == 0 then\n" \
  "    hwm = 0\n" \
  "  else\n" \
  "    local t = redis.call('time')\n" \
  "    if m == false then\n" \
  "      redis.call('set', KEYS[" #M "], string.format('%.0f', tonumber(t[1]) * 1000 + " \
  "math.floor(tonumber(t[2]) / 1000)))\n" \
  "    end\n" \
  "    hwm = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), b * 1000, " \
  "tonumber(stored) or 0)\n" \
  "  end\n" \
  "  stored = false\n" \
  "end\n" \
  "if hwm >= 9007199254740991 then\n" \
  "  return {'exhausted', stored or string.format('%.0f', hwm), KEYS[" #H "]}\n" \
  "end\n"
#define DLOCK_FENCE_NEXT(H, M) DLOCK_FENCE_LAST(H, M) "local fence = hwm + 1\n"
#define DLOCK_FENCE_COMMIT(H) \
  "redis.call('set', KEYS[" #H "], string.format('%.0f', fence))\n"

// DLOCK_UNDO_FENCE(H): a refusal after the INCR that gave `fence` (never
// handed out) puts the mark back: deleted if that INCR created it
// (`fresh_mark`), else DECR (a raise by DLOCK_FENCE_VALIDATE stays, one
// lower: harmless, fences need only rise).
#define DLOCK_UNDO_FENCE(H) \
  "if fresh_mark then redis.call('del', KEYS[" #H "]) " \
  "else redis.call('decr', KEYS[" #H "]) end\n"

// DLOCK_FENCE_INCR(H, M, UNDO): the next fence by INCR of the mark, for the
// acquires that issue one (plain, writer, reentrant, semaphore, fair), run
// once the script has decided to grant. Sets `fence`. One command where the
// mark exists (DLOCK_FENCE_NEXT + DLOCK_FENCE_COMMIT: GET, SET and Lua
// arithmetic). UNDO is Lua that takes back what the script already wrote
// for the grant (the plain and writer acquires SET the lock key first:
// "redis.call('del', KEYS[1])"; the script is atomic, so nobody saw it);
// every refusal below runs it and leaves the mark as it found it:
//   - INCR fails (the mark is not an integer, or a hash: WRONGTYPE; or it
//     would overflow int64): the error is returned as it is, unless the
//     mark is a whole number at or past 2^53 - 1, which is
//     {'exhausted', value, its key} as before.
//   - INCR answers past 2^53 - 1 (the mark was at or past it): DECR undoes
//     it, {'exhausted', value, key}.
//   - then DLOCK_FENCE_VALIDATE: at most DLOCK_FENCE_CHECK_BELOW the mark
//     may have been recreated by INCRs (ours: INCR answered 1; or a
//     transaction's: lease_command.h), so the marker decides. A trusted
//     marker keeps the fence (a missing mark starts at 0); a time marker T
//     keeps it only above T x 1000; otherwise (and with no marker, which is
//     created with TIME in ms) fence = max(TIME us, marker x 1000, fence) +
//     1, stored. A marker that is not a whole number of ms in [0, 9e12] is
//     {'foreign', 'marker', value}; a marker of another type returns GET's
//     error (pcall: after the grant's write the script must not fail half
//     way). `fresh_mark` records that this acquire's INCR created the mark,
//     for DLOCK_UNDO_FENCE.
#define DLOCK_FENCE_INCR(H, M, UNDO) \
  DLOCK_FENCE_INCR_AS(H, M, UNDO, "fence == 1", DLOCK_FENCE_CHECK_BELOW, "")
// The same with the Lua expression FRESH for `fresh_mark` (given `fence`),
// the bound below which the marker is read and KEEP (DLOCK_FENCE_VALIDATE).
#define DLOCK_FENCE_INCR_AS(H, M, UNDO, FRESH, BELOW, KEEP) \
  "local fence = redis.pcall('incr', KEYS[" #H "])\n" \
  "if type(fence) == 'table' then\n" \
  "  " UNDO \
  "  local s = redis.pcall('get', KEYS[" #H "])\n" \
  "  local v = type(s) == 'string' and tonumber(s)\n" \
  "  if v and v == math.floor(v) and v >= 9007199254740991 then\n" \
  "    return {'exhausted', s, KEYS[" #H "]}\n" \
  "  end\n" \
  "  return fence\n" \
  "end\n" \
  "if fence > 9007199254740991 then\n" \
  "  redis.call('decr', KEYS[" #H "])\n" \
  "  " UNDO \
  "  return {'exhausted', redis.call('get', KEYS[" #H "]), KEYS[" #H "]}\n" \
  "end\n" \
  "local fresh_mark = " FRESH "\n" \
  DLOCK_FENCE_VALIDATE(H, M, UNDO, BELOW, KEEP)

// DLOCK_FENCE_VALIDATE(H, M, UNDO, BELOW, KEEP): after `fence` came from an
// INCR of the mark KEYS[H] (`fresh_mark`: that INCR created it), makes it
// a valid fence (see DLOCK_FENCE_CHECK_BELOW): at most BELOW, the marker
// KEYS[M] is read; a mark that is not valid (a time marker T with fence <=
// T x 1000; or a missing marker with fence <= DLOCK_FENCE_CHECK_BELOW,
// and then the marker is created with TIME ms) is raised to max(TIME us,
// T x 1000) + 1 and stored. A missing marker with a fence above that
// bound (read only when BELOW is higher: AcquireAfterTxScript) keeps the
// fence and runs the Lua KEEP. A foreign marker refuses the
// acquire ({'foreign', 'marker', value}, or GET's error for another type)
// with the mark put back (DLOCK_UNDO_FENCE) and UNDO run.
#define DLOCK_FENCE_VALIDATE(H, M, UNDO, BELOW, KEEP) \
  "if fence <= " BELOW " then\n" \
  "  local m = redis.pcall('get', KEYS[" #M "])\n" \
  "  local b = 0\n" \
  "  if m ~= false then\n" \
  "    b = type(m) == 'string' and tonumber(m)\n" \
  "    if not b or b < 0 or b > 9000000000000 or b ~= math.floor(b) then\n" \
  "      " DLOCK_UNDO_FENCE(H) \
  "      " UNDO \
  "      if type(m) == 'table' then return m end\n" \
  "      return {'foreign', 'marker', m}\n" \
  "    end\n" \
  "  end\n" \
  "  if (m == false and fence <= " DLOCK_FENCE_CHECK_BELOW ") or " \
  "(b ~= 0 and fence <= b * 1000) then\n" \
  "    local t = redis.call('time')\n" \
  "    if m == false then\n" \
  "      redis.call('set', KEYS[" #M "], string.format('%.0f', tonumber(t[1]) * 1000 + " \
  "math.floor(tonumber(t[2]) / 1000)))\n" \
  "    end\n" \
  "    fence = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), b * 1000, fence) + 1\n" \
  "    if fence > 9007199254740991 then\n" \
  "      " DLOCK_UNDO_FENCE(H) \
  "      " UNDO \
  "      return {'exhausted', string.format('%.0f', fence - 1), KEYS[" #H "]}\n" \
  "    end\n" \
  "    redis.call('set', KEYS[" #H "], string.format('%.0f', fence))\n" \
  "  elseif m == false then\n" \
  "    " KEEP \
  "  end\n" \
  "end\n"

// The KEEP of the after-transaction acquires (DLOCK_FENCE_VALIDATE): a
// missing marker KEYS[M] while a mark above DLOCK_FENCE_CHECK_BELOW lives is
// recreated as the mark's value in ms, floor((fence - 1) / 1000), or TIME
// ms if that is earlier (scripts.cc, AcquireAfterTxScript).
#define DLOCK_MARKER_FROM_FENCE(M) \
  "local t = redis.call('time')\n" \
  "    redis.call('set', KEYS[" #M "], string.format('%.0f', math.min(" \
  "tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), " \
  "math.floor((fence - 1) / 1000))))\n"

// DLOCK_RESTART_RULE_AFTER_FENCE(M, W, H, UNDO): the restart rule (KEYS[M]
// the data-set marker, ARGV[W] the window in ms, KEYS[H] the mark) for an
// acquire that has
// already taken the lock and its fence (DLOCK_FENCE_INCR), with a fast
// path that does not read the marker. Nothing with a window of 0.
//
// Why the fast path is right. Let hwm = fence - 1, the mark before this
// acquire. (1) A mark starts at or above the server's TIME in us at its
// creation (FENCES: max(TIME us, marker x 1000); RedLock's RaiseFence
// starts a missing mark the same way, then only raises it), or at 0 under
// a trusted marker, and only grows (INCR, raises). (2) The mark lives in
// the data set, so the data set began at or before the mark's creation.
// Hence now_us - hwm <= now_us - TIME_us(creation) <= the data set's age,
// and if now_us - hwm >= window_us the data set is at least the window
// old: the rule passes without GET marker. Otherwise the full rule runs
// (GET marker, created with now when missing; refusals as
// DLOCK_RESTART_RULE: 'young', foreign marker), and a refusal runs UNDO
// (the lock key is deleted), puts the mark back as it was (DLOCK_UNDO_FENCE:
// a +1 left would be harmless, since fences need only rise, but a mark
// created by a refused acquire would make a data set declared trusted
// afterwards start its fences at TIME instead of 1) and returns. Cases:
//   - a mark raised above TIME (RedLock's fence_sync to a peer's fence):
//     now_us - hwm is small or negative, the full rule runs (cost, not
//     safety).
//   - a clock stepped back: now_us shrinks, the full rule runs.
//   - a trusted marker ("0"): the full rule always passes; the fast path
//     passes once TIME us exceeds the mark by the window (at once for a
//     mark started at 0).
//   - a marker deleted by hand (or foreign) while the mark lives: the full
//     rule would restart the window (it cannot tell a deleted marker from a
//     new data set) or refuse the foreign marker; the fast path passes,
//     because the surviving mark proves the data set older than the window.
//     The marker is read (and recreated) again only when the fast check
//     fails or the mark is lost.
//   - a lost mark: DLOCK_FENCE_INCR restarts it at TIME us (fence - 1 =
//     TIME us), so the fast check fails and the full rule reads the marker,
//     as the window needs after a restart.
//   - a failover: the promoted replica inherits the mark and the marker,
//     both written under the old master's clock; the fast path and the
//     full rule compare them with the new master's TIME alike, so skew
//     between the two clocks moves both by the same amount.
//   - RedLock: each server's mark starts at its own TIME and the write-back
//     raises lagging marks to the quorum's largest fence, so the fast path
//     starts on every server a window after the latest mark start (plus the
//     clock lead of that mark's server); before that the full rule runs.
// A refusal after DLOCK_FENCE_INCR gave `fence` (never handed out; the
// script is atomic) leaves the mark as it found it: deleted if INCR found
// it missing (`fresh_mark`), else DECR.
#define DLOCK_RESTART_RULE_AFTER_FENCE(M, W, H, UNDO) \
  "local window = tonumber(ARGV[" #W "]) or 0\n" \
  "if window > 0 then\n" \
  "  local t = redis.call('time')\n" \
  "  if tonumber(t[1]) * 1000000 + tonumber(t[2]) - (fence - 1) < window * 1000 then\n" \
  "    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "    local began = redis.pcall('get', KEYS[" #M "])\n" \
  "    if type(began) == 'table' then\n" \
  "      " DLOCK_UNDO_FENCE(H) UNDO \
  "      return began\n" \
  "    end\n" \
  "    if began == false then\n" \
  "      redis.call('set', KEYS[" #M "], string.format('%.0f', now))\n" \
  "      began = now\n" \
  "    else\n" \
  "      local b = tonumber(began)\n" \
  "      if b == nil or b < 0 or b > 9000000000000 or b ~= math.floor(b) then\n" \
  "        " DLOCK_UNDO_FENCE(H) UNDO \
  "        return {'foreign', 'marker', began}\n" \
  "      end\n" \
  "      began = b\n" \
  "    end\n" \
  "    if now - began < window then\n" \
  "      " DLOCK_UNDO_FENCE(H) UNDO \
  "      return {'young', window - (now - began), now - began}\n" \
  "    end\n" \
  "  end\n" \
  "end\n"

// After `local old = redis.pcall('set', KEYS[1], ..., 'nx', 'px', ttl,
// 'get')` (Redis >= 7.0: the old value, nil when it set; WRONGTYPE when
// the key is not a string, and then it does not set): returns the
// foreign-data refusal ({'foreign', type, -1 with no TTL else 0}) when the
// key is not a holder's (another type, or a string with no TTL), or SET's
// own error (not WRONGTYPE: e.g. a bad PX) as it is; falls through when a
// holder (a string with a TTL) has it. Only the refused SET pays PTTL (and
// TYPE only for another type).
#define DLOCK_REFUSE_FOREIGN_AFTER_SET_GET \
  "if type(old) == 'table' then\n" \
  "  local kind = redis.call('type', KEYS[1])['ok']\n" \
  "  if kind == 'string' or kind == 'none' then return old end\n" \
  "  return {'foreign', kind, redis.call('pttl', KEYS[1]) < 0 and -1 or 0}\n" \
  "end\n" \
  "if redis.call('pttl', KEYS[1]) < 0 then\n" \
  "  return {'foreign', 'string', -1}\n" \
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
