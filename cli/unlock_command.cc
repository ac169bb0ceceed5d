// `dlock unlock [--force] RESOURCE`: the admin way out for a lock left by a
// holder that died with a long TTL.
//
// Without --force it only shows, per server, what holds the resource: the
// lock key (token prefix, fence, remaining TTL, a semaphore's permits;
// lock_key.h), a read-write lock's readers and a waiting writer's intent
// (readers_status.h), the fair queue (fair_queue_status.h), and refuses
// (exit 64) when anything holds it; it writes nothing. With --force it runs,
// on every server, one script that atomically
//   - removes every kind of holder dlock writes for the resource: the lock
//     key if it is a dlock lock (a string token: SimpleLock, RedLock,
//     FairLock, a ReadWriteLock writer; a reentrant hash; a Semaphore's
//     sorted set of permits), the ReadWriteLock readers hash and the
//     writer-intent marker, and the FairLock queue (its waiters are woken on
//     their channels and queue again: the first to answer takes the lock).
//     Foreign data at the lock key stops the script before any write (exit
//     70); foreign data at a side key is left alone and reported (exit 70
//     too, after the rest was removed),
//   - increments the fencing counter when a holder (lock key, permits,
//     readers) was removed, so a write an old holder still makes with its
//     fence is rejected by a protected resource that has seen any later fence
//     (the next holder's fence is higher still),
//   - publishes on the release channel, so waiters wake at once (a user
//     without PUBLISH permission: everything is still removed and waiters
//     fall back to their retry backoff; reported as a warning).
// and prints what it removed, kind by kind. Nothing there: says so, exit 0.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/fair_queue_status.h"
#include "dlock/cli/lock_key.h"
#include "dlock/cli/readers_status.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/script_prelude.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] lock key, KEYS[2] readers hash, KEYS[3] writer-intent marker,
// KEYS[4] fair queue, KEYS[5] the data-set marker, KEYS[6] the fence
// high-water mark (the fence is
// bumped as an acquire issues one: lock/script_prelude.h, FENCES); ARGV[1]
// release channel, ARGV[2]
// the fair waiters' channel prefix. Returns {lock type, pttl, value|false,
// hash owners, new fence|false, publish error|false, permits, readers,
// intent pttl (-2: none), fair waiters, {foreign side keys}}. Nothing is
// written if the lock key holds foreign data; the fence is bumped before
// anything is deleted, so a fence that cannot be incremented (not an
// integer, at its maximum) aborts the script before any write.
const Script& ForceUnlockScript() {
  static const Script* const kScript = new Script(R"lua(
local function kind(k)
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t.ok end
  return t
end
local t = kind(KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local value, owners, permits = false, 0, 0
if t == 'string' then
  value = redis.call('GET', KEYS[1])
elseif t == 'hash' then
  owners = redis.call('HLEN', KEYS[1]) - redis.call('HEXISTS', KEYS[1], '#fence')
elseif t == 'zset' then
  permits = redis.call('ZCARD', KEYS[1])
elseif t ~= 'none' then
  return {t, pttl, false, 0, false, false, 0, 0, -2, 0, {}}
end
local foreign = {}
local rt, readers = kind(KEYS[2]), 0
if rt == 'hash' then
  readers = redis.call('HLEN', KEYS[2])
elseif rt ~= 'none' then
  foreign[#foreign + 1] = KEYS[2] .. ' holds a ' .. rt
end
local it, intent = kind(KEYS[3]), -2
if it == 'string' then
  intent = redis.call('PTTL', KEYS[3])
elseif it ~= 'none' then
  foreign[#foreign + 1] = KEYS[3] .. ' holds a ' .. it
end
local qt, waiters = kind(KEYS[4]), {}
if qt == 'hash' then
  local q = redis.call('HGETALL', KEYS[4])
  for i = 1, #q, 2 do
    if q[i] ~= '#next' then waiters[#waiters + 1] = q[i] end
  end
elseif qt ~= 'none' then
  foreign[#foreign + 1] = KEYS[4] .. ' holds a ' .. qt
end
)lua" "local bumped = false\n"
    "if t ~= 'none' or readers > 0 then\n"
    DLOCK_FENCE_NEXT(6, 5) DLOCK_FENCE_COMMIT(6) R"lua(
  bumped = fence
end
if t ~= 'none' then redis.call('DEL', KEYS[1]) end
if rt == 'hash' then redis.call('DEL', KEYS[2]) end
if it == 'string' then redis.call('DEL', KEYS[3]) end
if qt == 'hash' then redis.call('DEL', KEYS[4]) end
local perr = false
local function publish(channel, message)
  local p = redis.pcall('PUBLISH', channel, message)
  if type(p) == 'table' and p.err then perr = p.err end
end
if t ~= 'none' or readers > 0 or intent ~= -2 then publish(ARGV[1], 'released') end
for _, w in ipairs(waiters) do
  publish(ARGV[2] .. string.match(w, '^[^:]*'), w)
end
return {t, pttl, value, owners, bumped, perr, permits, readers, intent, #waiters, foreign}
)lua");
  return *kScript;
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// The fair queue's key and its waiters' channel prefix (fair_commands.h).
std::string FairQueueKey(const KeyScheme& keys, const std::string& resource) {
  return absl::StrCat(keys.LockKey(resource), ":queue");
}
std::string FairWaiterChannelPrefix(const KeyScheme& keys) {
  return absl::StrCat(keys.prefix, "waiter:");
}

}  // namespace

int UnlockCommand(const CommonOptions& common, const std::string& resource, bool force) {
  if (int code = CheckResourceArgument(resource); code != kExitOk) return code;
  int code = kExitOk;
  std::unique_ptr<Session> session = OpenForCommand(common, &code);
  if (session == nullptr) return code;
  Session& s = *session;
  KeyScheme keys;
  keys.prefix = common.prefix;
  const std::string r = absl::CEscape(resource);
  std::printf("resource \"%s\" (key %s)\n", r.c_str(),
              absl::CEscape(keys.LockKey(resource)).c_str());
  int held = 0, foreign = 0, failed = 0, lingering = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string where = common.urls[i].Display();
    if (!force) {
      absl::StatusOr<KeySnapshot> key = ReadLockKey(s, i, keys, resource);
      absl::StatusOr<ReadersSnapshot> readers =
          key.ok() ? ReadReaders(s, i, keys, resource) : key.status();
      absl::StatusOr<FairQueueSnapshot> queue =
          readers.ok() ? ReadFairQueue(s, i, keys, resource) : readers.status();
      if (!queue.ok()) {
        std::printf("  %s: unreachable: %s\n", where.c_str(),
                    std::string(queue.status().message()).c_str());
        ++failed;
        continue;
      }
      std::printf("  %s: %s\n", where.c_str(), DescribeKey(*key).c_str());
      for (const std::string& more : {DescribeReaders(*readers), DescribeFairQueue(*queue)}) {
        if (!more.empty()) std::printf("  %s: %s\n", where.c_str(), more.c_str());
      }
      if (key->held() || readers->readers > 0) {
        ++held;
      } else if (readers->writer_waiting_ms >= 0 || !queue->waiters.empty()) {
        ++lingering;
      }
      if (!key->free() && !key->is_lock() && key->type != "zset") ++foreign;
      continue;
    }
    absl::StatusOr<Reply> reply = s.RunScript(
        i, ForceUnlockScript(),
        {keys.LockKey(resource), ReadersKey(keys, resource),
         WriterIntentKey(keys, resource), FairQueueKey(keys, resource),
         ServerKeys(s, i, keys).DataSetKey(resource),
         ServerKeys(s, i, keys).FenceHwmKey(resource)},
        {keys.ChannelKey(resource), FairWaiterChannelPrefix(keys)});
    if (!reply.ok() || reply->is_error()) {
      std::printf("  %s: FAILED: %s\n", where.c_str(),
                  reply.ok() ? reply->str.c_str() : reply.status().ToString().c_str());
      ++failed;
      continue;
    }
    if (!reply->is_array() || reply->elements.size() != 11 || !reply->elements[10].is_array()) {
      std::printf("  %s: FAILED: unexpected reply %s\n", where.c_str(),
                  reply->DebugString().c_str());
      ++failed;
      continue;
    }
    const std::vector<Reply>& e = reply->elements;
    KeySnapshot removed;
    removed.type = e[0].str;
    removed.pttl = e[1].integer;
    if (e[2].is_string()) removed.token = e[2].str;
    removed.owners = e[3].integer;
    const int64_t permits = e[6].integer, readers = e[7].integer, intent = e[8].integer,
                  waiters = e[9].integer;
    if (!removed.free() && !removed.is_lock() && removed.type != "zset") {
      std::printf("  %s: %s; not a dlock lock, NOTHING removed\n", where.c_str(),
                  DescribeKey(removed).c_str());
      ++foreign;
      continue;
    }
    // What was removed, kind by kind.
    std::vector<std::string> parts;
    if (removed.is_lock()) {
      if (e[4].is_integer()) removed.fence = absl::StrCat(e[4].integer - 1);
      parts.push_back(DescribeKey(removed));
    }
    if (removed.type == "zset") {
      parts.push_back(absl::StrCat("semaphore, ", Plural(permits, "permit", "permits"),
                                   " (live or expired)"));
    }
    if (readers > 0) parts.push_back(Plural(readers, "reader", "readers"));
    if (intent != -2) parts.push_back("a waiting writer's intent marker");
    if (waiters > 0) {
      parts.push_back(absl::StrCat("the fair queue (", Plural(waiters, "waiter", "waiters"),
                                   ", woken to queue again)"));
    }
    for (const Reply& f : e[10].elements) {
      std::printf("  %s: %s (foreign data), NOT removed\n", where.c_str(), f.str.c_str());
      ++foreign;
    }
    if (parts.empty()) {
      std::printf("  %s: free; nothing removed\n", where.c_str());
      continue;
    }
    ++held;
    std::string text = absl::StrCat("removed ", absl::StrJoin(parts, "; "));
    if (e[4].is_integer()) absl::StrAppend(&text, "; fence now ", e[4].integer);
    if (e[5].is_string()) {
      absl::StrAppend(&text, "; WARNING: waiters not notified (", e[5].str,
                      "); they retry after their backoff");
    } else {
      absl::StrAppend(&text, "; waiters notified");
    }
    std::printf("  %s: %s\n", where.c_str(), text.c_str());
  }
  if (foreign > 0) {
    std::fprintf(stderr,
                 "dlock: a key of \"%s\" holds foreign data (not written by dlock); "
                 "remove it by hand if it is yours to remove\n",
                 r.c_str());
    return kExitInternal;
  }
  if (!force && held > 0) {
    std::fprintf(stderr,
                 "dlock: lock \"%s\" is held; to remove it anyway add --force (the fence "
                 "is bumped so the holder's further writes are fenced off)\n",
                 r.c_str());
    return kExitUsage;
  }
  if (failed > 0) {
    std::fprintf(stderr, "dlock: %d of %zu servers could not be %s\n", failed, s.size(),
                 force ? "unlocked" : "read");
    return kExitUnavailable;
  }
  if (held == 0 && lingering > 0) {
    std::printf("state: free (a waiting writer's intent or fair waiters remain; --force "
                "clears them)\n");
  } else if (held == 0) {
    std::printf("state: free\n");
  } else {
    std::printf("state: removed on %d of %zu servers\n", held, s.size());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
