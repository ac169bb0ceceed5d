#include "dlock/cli/lock_key.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

}  // namespace

absl::StatusOr<KeySnapshot> ReadLockKey(Session& session, size_t i,
                                        const KeyScheme& keys,
                                        const std::string& resource) {
  absl::StatusOr<Reply> reply = session.RunScript(
      i, SnapshotScript(), {keys.LockKey(resource), keys.FenceKey(resource)}, {});
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::UnavailableError(reply->str);
  if (!reply->is_array() || reply->elements.size() != 5) {
    return absl::InternalError(absl::StrCat("unexpected reply ", reply->DebugString()));
  }
  const std::vector<Reply>& e = reply->elements;
  KeySnapshot k;
  k.type = e[0].str;
  k.pttl = e[1].integer;
  if (e[2].is_string()) k.fence = e[2].str;
  if (e[3].is_string()) k.token = e[3].str;
  k.owners = e[4].integer;
  return k;
}

std::string ShortToken(const std::string& token) {
  if (token.size() <= 8) return "(short token)";
  return absl::StrCat(absl::CEscape(token.substr(0, 8)), "...");
}

std::string DescribeTtl(int64_t pttl_ms) {
  return pttl_ms >= 0
             ? absl::StrCat("expires in ", absl::FormatDuration(absl::Milliseconds(pttl_ms)))
             : "NO EXPIRY (not set by dlock?)";
}

std::string DescribeKey(const KeySnapshot& k) {
  if (k.free()) return absl::StrCat("free, fence ", k.fence);
  const std::string ttl = DescribeTtl(k.pttl);
  if (k.type == "string") {
    return absl::StrCat("held, ", ttl, ", fence ", k.fence, ", token ", ShortToken(k.token));
  }
  if (k.type == "hash") {
    return absl::StrCat("held (reentrant, ", k.owners, " owner", k.owners == 1 ? "" : "s",
                        "), ", ttl, ", fence ", k.fence);
  }
  return absl::StrCat("key holds a ", k.type, " (foreign data), ", ttl);
}

}  // namespace cli
}  // namespace dlock
