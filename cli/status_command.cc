// `dlock status RESOURCE`: one atomic snapshot per server of the lock key
// (type, PTTL, value; a semaphore's live permit holders), the fencing
// counter (lock_key.h), a read-write lock's readers and a fair lock's queue.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/fair_queue_status.h"
#include "dlock/cli/lock_key.h"
#include "dlock/cli/readers_status.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace cli {

int StatusCommand(const CommonOptions& common, const std::string& resource) {
  if (int code = CheckResourceArgument(resource); code != kExitOk) return code;
  int code = kExitOk;
  std::unique_ptr<Session> session = OpenForCommand(common, &code);
  if (session == nullptr) return code;
  KeyScheme keys;
  keys.prefix = common.prefix;
  std::printf("resource \"%s\" (key %s)\n", absl::CEscape(resource).c_str(),
              absl::CEscape(keys.LockKey(resource)).c_str());
  int held = 0, reachable = 0;
  bool shared = false;
  for (size_t i = 0; i < session->size(); ++i) {
    std::string where = common.urls[i].Display();
    Session& s = *session;
    absl::StatusOr<KeySnapshot> key = ReadLockKey(s, i, keys, resource);
    if (!key.ok()) {
      std::printf("  %s: %s: %s\n", where.c_str(),
                  absl::IsInternal(key.status()) ? "unexpected reply" : "unreachable",
                  std::string(key.status().message()).c_str());
      continue;
    }
    ++reachable;
    if (key->held()) ++held;
    std::printf("  %s: %s\n", where.c_str(), DescribeKey(*key).c_str());
    // The read-write lock's readers and waiting writer (single server).
    if (session->size() == 1) {
      absl::StatusOr<ReadersSnapshot> readers = ReadReaders(s, i, keys, resource);
      const std::string text = readers.ok() ? DescribeReaders(*readers) : "";
      if (!text.empty()) std::printf("  %s: %s\n", where.c_str(), text.c_str());
      if (readers.ok() && readers->readers > 0 && key->free()) shared = true;
      // The fair lock's waiting queue, in the order it will be served.
      absl::StatusOr<FairQueueSnapshot> queue = ReadFairQueue(s, i, keys, resource);
      const std::string waiting = queue.ok() ? DescribeFairQueue(*queue) : "";
      if (!waiting.empty()) std::printf("  %s: %s\n", where.c_str(), waiting.c_str());
    }
  }
  size_t n = session->size();
  size_t quorum = n / 2 + 1;
  if (reachable < static_cast<int>(quorum)) {
    std::printf("state: unknown (%d of %zu servers reachable)\n", reachable, n);
    return kExitUnavailable;
  }
  if (n == 1) {
    std::printf("state: %s\n", held ? "held" : shared ? "held (shared)" : "free");
  } else {
    std::printf("state: %s (held on %d of %zu servers, quorum %zu)\n",
                held >= static_cast<int>(quorum) ? "held" : "free", held, n, quorum);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
