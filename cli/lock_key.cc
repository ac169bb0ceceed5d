#include "dlock/cli/lock_key.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/script_prelude.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] lock key, KEYS[2] the server's (slot's) fence high-water mark.
// Returns {type, pttl, fence (the mark)|false,
// value|false, hash-owners|0, permits}: for a semaphore's sorted set,
// permits = {token, ms left, ...} of the live permits (expiry after the
// server's TIME), soonest expiry first; else empty. Writes nothing.
const Script& SnapshotScript() {
  static const Script* const kScript = new Script(DLOCK_SERVER_NOW R"lua(
local ty = redis.call('TYPE', KEYS[1])
if type(ty) == 'table' then ty = ty.ok end
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local value = false
local owners = 0
if ty == 'string' then
  value = redis.call('GET', KEYS[1])
elseif ty == 'hash' then
  owners = redis.call('HLEN', KEYS[1]) - redis.call('HEXISTS', KEYS[1], '#fence')
end
local permits = {}
if ty == 'zset' then
  local z = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now), '+inf',
                       'WITHSCORES')
  for i = 1, #z, 2 do
    permits[#permits + 1] = z[i]
    permits[#permits + 1] = tonumber(z[i + 1]) - now
  end
end
return {ty, pttl, fence, value, owners, permits}
)lua");
  return *kScript;
}

}  // namespace

KeyScheme ServerKeys(Session& session, size_t i, const KeyScheme& keys) {
  KeyScheme k = keys;
  Transport* t = session.transport(i);
  k.per_slot_data_set = t != nullptr && t->cluster();
  return k;
}

absl::StatusOr<KeySnapshot> ReadLockKey(Session& session, size_t i,
                                        const KeyScheme& keys,
                                        const std::string& resource) {
  absl::StatusOr<Reply> reply = session.RunScript(
      i, SnapshotScript(),
      {keys.LockKey(resource), ServerKeys(session, i, keys).FenceHwmKey(resource)},
      {});
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::UnavailableError(reply->str);
  if (!reply->is_array() || reply->elements.size() != 6 || !reply->elements[5].is_array()) {
    return absl::InternalError(absl::StrCat("unexpected reply ", reply->DebugString()));
  }
  const std::vector<Reply>& e = reply->elements;
  KeySnapshot k;
  k.type = e[0].str;
  k.pttl = e[1].integer;
  if (e[2].is_string()) k.fence = e[2].str;
  if (e[3].is_string()) k.token = e[3].str;
  k.owners = e[4].integer;
  for (size_t j = 0; j + 1 < e[5].elements.size(); j += 2) {
    k.permits.emplace_back(e[5].elements[j].str, e[5].elements[j + 1].integer);
  }
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
  if (k.type == "zset") {
    // A Semaphore's holders (dlock run --permits); tokens shortened.
    std::string out = absl::StrCat("semaphore, ", k.permits.size(), " permit",
                                   k.permits.size() == 1 ? "" : "s", " held, fence ", k.fence);
    for (const auto& [token, ms_left] : k.permits) {
      absl::StrAppend(&out, "\n    permit ", ShortToken(token), ", ", DescribeTtl(ms_left));
    }
    return out;
  }
  return absl::StrCat("key holds a ", k.type, " (foreign data), ", ttl);
}

}  // namespace cli
}  // namespace dlock
