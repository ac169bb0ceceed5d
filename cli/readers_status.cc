#include "dlock/cli/readers_status.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/script_prelude.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {
namespace {

// KEYS[1] readers hash, KEYS[2] writer-intent marker. Read-only. Returns
// {live readers, ms until the last expires, marker PTTL}. A readers key of
// another type reads as no readers (status reports, it does not judge).
const Script& ReadersScript() {
  static const Script* const kScript = new Script(DLOCK_SERVER_NOW R"lua(
local live, last = 0, 0
local rs = redis.pcall('HGETALL', KEYS[1])
if rs.err == nil then
  for i = 1, #rs, 2 do
    local e = tonumber(rs[i + 1])
    if e ~= nil and e > now then
      live = live + 1
      if e - now > last then last = e - now end
    end
  end
end
return {live, last, redis.call('PTTL', KEYS[2])}
)lua");
  return *kScript;
}

}  // namespace

absl::StatusOr<ReadersSnapshot> ReadReaders(Session& session, size_t i,
                                            const KeyScheme& keys,
                                            const std::string& resource) {
  absl::StatusOr<Reply> reply =
      session.RunScript(i, ReadersScript(),
                        {ReadersKey(keys, resource), WriterIntentKey(keys, resource)}, {});
  if (!reply.ok()) return reply.status();
  if (reply->is_error()) return absl::UnavailableError(reply->str);
  if (!reply->is_array() || reply->elements.size() != 3) {
    return absl::InternalError(absl::StrCat("unexpected reply ", reply->DebugString()));
  }
  ReadersSnapshot r;
  r.readers = reply->elements[0].integer;
  r.last_expiry_ms = reply->elements[1].integer;
  r.writer_waiting_ms = reply->elements[2].integer;
  return r;
}

std::string DescribeReaders(const ReadersSnapshot& r) {
  std::string out;
  if (r.readers > 0) {
    out = absl::StrCat(r.readers, r.readers == 1 ? " reader" : " readers",
                       " (shared), the last expires in ",
                       absl::FormatDuration(absl::Milliseconds(r.last_expiry_ms)));
  }
  if (r.writer_waiting_ms >= 0) {
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    "a writer is waiting (new readers refused for ",
                    absl::FormatDuration(absl::Milliseconds(r.writer_waiting_ms)), ")");
  }
  return out;
}

}  // namespace cli
}  // namespace dlock
