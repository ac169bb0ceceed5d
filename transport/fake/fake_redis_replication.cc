// FakeRedis commands about replication: WAIT and ROLE. The fake has no
// replicas; SetAcknowledgingReplicas says how many WAIT reports.
#include <cstdint>

#include "absl/strings/numbers.h"
#include "dlock/transport/fake/fake_redis.h"

namespace dlock {

// WAIT numreplicas timeout: Redis checks both are integers (timeout >= 0)
// and answers how many replicas acknowledged this client's writes.
Reply FakeRedis::CmdWait(CallContext&, const std::vector<std::string>& argv) {
  int64_t wanted = 0, timeout = 0;
  if (!absl::SimpleAtoi(argv[1], &wanted) || !absl::SimpleAtoi(argv[2], &timeout)) {
    return Reply::Error("ERR value is not an integer or out of range");
  }
  if (timeout < 0) return Reply::Error("ERR timeout is negative");
  return Reply::Integer(acknowledging_replicas_);
}

// ROLE on a master: ["master", replication offset, [replicas...]].
Reply FakeRedis::CmdRole(CallContext&, const std::vector<std::string>&) {
  return Reply::Array(
      {Reply::String("master"), Reply::Integer(0), Reply::Array({})});
}

}  // namespace dlock
