// `dlock unlock [--force] RESOURCE`: the admin way out for a lock left by a
// holder that died with a long TTL.
//
// Without --force it only shows, per server, what holds the lock (token
// prefix, fence, remaining TTL; lock_key.h) and refuses (exit 64). With
// --force it runs, on every server, one script that atomically
//   - removes the lock key if it is a dlock lock (string token or reentrant
//     hash; foreign data is left alone and reported, exit 70),
//   - increments the fencing counter, so a write the old holder still makes
//     with its fence is rejected by a protected resource that has seen any
//     later fence (the next holder's fence is higher still),
//   - publishes on the release channel, so waiters wake at once (a user
//     without PUBLISH permission: the lock is still removed and waiters fall
//     back to their retry backoff; reported as a warning).
// and prints what it removed. A free lock: says so, exit 0.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/lock_key.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] lock key, KEYS[2] fence key; ARGV[1] release channel. Returns
// {type, pttl, value|false, owners, new fence|false, publish error|false}.
// Nothing is written unless the key is a dlock lock; the fence is bumped
// before the key is deleted so a fence that cannot be incremented (not an
// integer, at its maximum) aborts the script before any write.
const Script& ForceUnlockScript() {
  static const Script* const kScript = new Script(R"lua(
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t.ok end
local pttl = redis.call('PTTL', KEYS[1])
local value = false
local owners = 0
if t == 'string' then
  value = redis.call('GET', KEYS[1])
elseif t == 'hash' then
  owners = redis.call('HLEN', KEYS[1])
else
  return {t, pttl, false, 0, false, false}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
local published = redis.pcall('PUBLISH', ARGV[1], 'released')
local perr = false
if type(published) == 'table' and published.err then perr = published.err end
return {t, pttl, value, owners, fence, perr}
)lua");
  return *kScript;
}

}  // namespace

int UnlockCommand(const CommonOptions& common, const std::string& resource, bool force) {
  absl::Status valid = ValidateResource(resource);
  if (!valid.ok()) {
    std::fprintf(stderr, "dlock: %s\n", std::string(valid.message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.tls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    return ExitCodeForStatus(session.status());
  }
  Session& s = **session;
  KeyScheme keys;
  keys.prefix = common.prefix;
  const std::string r = absl::CEscape(resource);
  std::printf("resource \"%s\" (key %s)\n", r.c_str(),
              absl::CEscape(keys.LockKey(resource)).c_str());
  int held = 0, foreign = 0, failed = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string where = common.urls[i].Display();
    if (!force) {
      absl::StatusOr<KeySnapshot> key = ReadLockKey(s, i, keys, resource);
      if (!key.ok()) {
        std::printf("  %s: unreachable: %s\n", where.c_str(),
                    std::string(key.status().message()).c_str());
        ++failed;
        continue;
      }
      std::printf("  %s: %s\n", where.c_str(), DescribeKey(*key).c_str());
      if (key->is_lock()) ++held;
      if (!key->free() && !key->is_lock()) ++foreign;
      continue;
    }
    absl::StatusOr<Reply> reply =
        s.RunScript(i, ForceUnlockScript(), {keys.LockKey(resource), keys.FenceKey(resource)},
                    {keys.ChannelKey(resource)});
    if (!reply.ok() || reply->is_error()) {
      std::printf("  %s: FAILED: %s\n", where.c_str(),
                  reply.ok() ? reply->str.c_str() : reply.status().ToString().c_str());
      ++failed;
      continue;
    }
    if (!reply->is_array() || reply->elements.size() != 6) {
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
    if (removed.free()) {
      std::printf("  %s: free; nothing removed\n", where.c_str());
      continue;
    }
    if (!removed.is_lock()) {
      std::printf("  %s: %s; not a dlock lock, NOT removed\n", where.c_str(),
                  DescribeKey(removed).c_str());
      ++foreign;
      continue;
    }
    ++held;
    removed.fence = absl::StrCat(e[4].integer - 1);
    std::string woken = "waiters notified";
    if (e[5].is_string()) {
      woken = absl::StrCat("WARNING: waiters not notified (", e[5].str,
                           "); they take the lock after their retry backoff");
    }
    std::printf("  %s: removed %s; fence now %lld; %s\n", where.c_str(),
                DescribeKey(removed).c_str(), static_cast<long long>(e[4].integer),
                woken.c_str());
  }
  if (foreign > 0) {
    std::fprintf(stderr,
                 "dlock: the key of \"%s\" holds foreign data (not written by dlock); "
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
  if (held == 0) {
    std::printf("state: free\n");
  } else {
    std::printf("state: removed on %d of %zu servers\n", held, s.size());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
