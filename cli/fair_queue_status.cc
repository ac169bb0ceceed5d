#include "dlock/cli/fair_queue_status.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/script_prelude.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] the queue hash. Read-only (expired entries are skipped, not
// deleted: the fair scripts trim them). Returns {foreign count, waiter1,
// ticket1, ms-left1, ...} of the live entries, unordered.
const Script& FairQueueScript() {
  static const Script* const kScript = new Script(DLOCK_SERVER_NOW R"lua(
local out = {0}
local q = redis.pcall('HGETALL', KEYS[1])
if q.err ~= nil then return out end
for i = 1, #q, 2 do
  local w, v = q[i], q[i + 1]
  if w ~= '#next' then
    local sep = string.find(v, ':', 1, true)
    local ticket = sep and tonumber(string.sub(v, 1, sep - 1))
    local expiry = sep and tonumber(string.sub(v, sep + 1))
    if ticket == nil or expiry == nil then
      out[1] = out[1] + 1
    elseif expiry > now then
      out[#out + 1] = w
      out[#out + 1] = ticket
      out[#out + 1] = expiry - now
    end
  end
end
return out
)lua");
  return *kScript;
}

}  // namespace

absl::StatusOr<FairQueueSnapshot> ReadFairQueue(Session& session, size_t i,
                                                const KeyScheme& keys,
                                                const std::string& resource) {
  // The key FairCommands::QueueKey names (lock/fair_commands.h).
  absl::StatusOr<Reply> reply =
      session.RunScript(i, FairQueueScript(), {absl::StrCat(keys.LockKey(resource), ":queue")}, {});
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::UnavailableError(reply->str);
  const std::vector<Reply>* e = reply->is_array() ? &reply->elements : nullptr;
  if (e == nullptr || e->empty() || (e->size() - 1) % 3 != 0) {
    return absl::InternalError(absl::StrCat("unexpected reply ", reply->DebugString()));
  }
  FairQueueSnapshot q;
  q.foreign = (*e)[0].integer;
  for (size_t k = 1; k + 2 < e->size(); k += 3) {
    q.waiters.push_back({(*e)[k].str, (*e)[k + 1].integer, (*e)[k + 2].integer});
  }
  std::sort(q.waiters.begin(), q.waiters.end(),
            [](const FairWaiter& a, const FairWaiter& b) { return a.ticket < b.ticket; });
  return q;
}

std::string DescribeFairQueue(const FairQueueSnapshot& q) {
  std::string out;
  if (!q.waiters.empty()) {
    out = absl::StrCat("fair queue: ", q.waiters.size(), " waiting:");
    for (size_t k = 0; k < q.waiters.size(); ++k) {
      absl::StrAppend(&out, k == 0 ? " " : ", ", k + 1, ". ", absl::CEscape(q.waiters[k].waiter),
                      " (expires in ",
                      absl::FormatDuration(absl::Milliseconds(q.waiters[k].expires_ms)), ")");
    }
  }
  if (q.foreign > 0) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", "fair queue holds ", q.foreign,
                    " foreign entr", q.foreign == 1 ? "y" : "ies");
  }
  return out;
}

}  // namespace cli
}  // namespace dlock
