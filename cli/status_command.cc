// `dlock status RESOURCE`: one atomic snapshot per server of the lock key
// (type, PTTL, value) and the fencing counter. Prints at most a short prefix
// of a token: a token is a bearer credential (whoever knows it can release
// or extend the lock).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] lock key, KEYS[2] fence key. Returns {type, pttl, fence|false,
// value|false, hash-owners|0}.
const Script& SnapshotScript() {
  static const Script* const kScript = new Script(R"lua(
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t.ok end
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local value = false
local owners = 0
if t == 'string' then
  value = redis.call('GET', KEYS[1])
elseif t == 'hash' then
  owners = redis.call('HLEN', KEYS[1])
end
return {t, pttl, fence, value, owners}
)lua");
  return *kScript;
}

std::string ShortToken(const std::string& token) {
  if (token.size() <= 8) return "(short token)";
  return absl::StrCat(absl::CEscape(token.substr(0, 8)), "...");
}

}  // namespace

int StatusCommand(const CommonOptions& common, const std::string& resource) {
  absl::Status valid = ValidateResource(resource);
  if (!valid.ok()) {
    std::fprintf(stderr, "dlock: %s\n", std::string(valid.message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    return kExitUnavailable;
  }
  KeyScheme keys;
  keys.prefix = common.prefix;
  std::printf("resource \"%s\" (key %s)\n", absl::CEscape(resource).c_str(),
              absl::CEscape(keys.LockKey(resource)).c_str());
  int held = 0, reachable = 0;
  for (size_t i = 0; i < (*session)->size(); ++i) {
    std::string where = common.urls[i].Display();
    Session& s = **session;
    absl::StatusOr<Reply> reply = s.Call(
        i, SnapshotScript().EvalArgv({keys.LockKey(resource), keys.FenceKey(resource)}, {}));
    if (!reply.ok() || reply->is_error()) {
      std::printf("  %s: unreachable: %s\n", where.c_str(),
                  reply.ok() ? reply->str.c_str() : reply.status().ToString().c_str());
      continue;
    }
    if (!reply->is_array() || reply->elements.size() != 5) {
      std::printf("  %s: unexpected reply %s\n", where.c_str(),
                  reply->DebugString().c_str());
      continue;
    }
    ++reachable;
    const std::vector<Reply>& e = reply->elements;
    std::string type = e[0].str;
    int64_t pttl = e[1].integer;
    std::string fence = e[2].is_string() ? e[2].str : "none";
    if (type == "none") {
      std::printf("  %s: free, fence %s\n", where.c_str(), fence.c_str());
      continue;
    }
    ++held;
    std::string ttl = pttl >= 0 ? absl::StrCat("expires in ",
                                               absl::FormatDuration(absl::Milliseconds(pttl)))
                                : "NO EXPIRY (not set by dlock?)";
    if (type == "string") {
      std::printf("  %s: held, %s, fence %s, token %s\n", where.c_str(),
                  ttl.c_str(), fence.c_str(), ShortToken(e[3].str).c_str());
    } else if (type == "hash") {
      std::printf("  %s: held (reentrant, %lld owner%s), %s, fence %s\n",
                  where.c_str(), static_cast<long long>(e[4].integer),
                  e[4].integer == 1 ? "" : "s", ttl.c_str(), fence.c_str());
    } else {
      std::printf("  %s: key holds a %s (foreign data), %s\n", where.c_str(),
                  type.c_str(), ttl.c_str());
    }
  }
  size_t n = (*session)->size();
  size_t quorum = n / 2 + 1;
  if (reachable < static_cast<int>(quorum)) {
    std::printf("state: unknown (%d of %zu servers reachable)\n", reachable, n);
    return kExitUnavailable;
  }
  if (n == 1) {
    std::printf("state: %s\n", held ? "held" : "free");
  } else {
    std::printf("state: %s (held on %d of %zu servers, quorum %zu)\n",
                held >= static_cast<int>(quorum) ? "held" : "free", held, n, quorum);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
