#include "dlock/cli/check_sentinel.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace cli {

std::vector<Finding> AnalyzeSentinel(const SentinelFacts& f) {
  using L = Finding::Level;
  std::vector<Finding> out;
  auto add = [&out](L level, std::string message) {
    out.push_back(Finding{level, std::move(message)});
  };
  add(L::kInfo, absl::StrCat("Sentinel master '", f.master_name, "' at ",
                             f.master_address.empty() ? "(none)" : f.master_address));
  if (f.sentinels_reachable < f.sentinels_listed) {
    add(L::kWarning, absl::StrCat(f.sentinels_listed - f.sentinels_reachable, " of ",
                                  f.sentinels_listed, " listed sentinels did not answer"));
  }
  if (f.sentinels_reachable > 0) {
    if (f.quorum_ok) {
      add(L::kOk, absl::StrCat("sentinels can fail over (CKQUORUM: ", f.quorum_answer, ")"));
    } else {
      add(L::kUnsafe, absl::StrCat("sentinels cannot authorize a failover (CKQUORUM: ",
                                   f.quorum_answer, ")"));
    }
    if (f.sentinels_known >= 0 && f.sentinels_known < 3) {
      add(L::kWarning,
          absl::StrCat("only ", f.sentinels_known,
                       " sentinel(s) watch the master: with fewer than 3, one machine "
                       "failure can block a failover"));
    }
    if (f.quorum >= 0) add(L::kInfo, absl::StrCat("sentinel quorum ", f.quorum));
  }
  if (f.replicas_online == 0) {
    add(L::kWarning,
        "no replica in sync: a failover has nothing to promote, and a master "
        "restart without persistence loses every lock");
  } else if (f.replicas_online > 0) {
    add(L::kOk, absl::StrCat(f.replicas_online, " replica(s) in sync (the most "
                             "--min-replicas can ask for)"));
  }
  for (Finding& m : AnalyzeMinReplicasToWrite(f.min_replicas_to_write)) {
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace cli
}  // namespace dlock
