#include "dlock/cli/check_cluster.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dlock {
namespace cli {
namespace {

constexpr int kSlots = 16384;

Finding Make(Finding::Level level, std::string message) {
  Finding f;
  f.level = level;
  f.message = std::move(message);
  return f;
}

// Slots named by CLUSTER NODES fields ("0-5460", "7", "[93->-id]" ignored).
int CountSlots(absl::string_view field) {
  if (field.empty() || field[0] == '[') return 0;
  std::vector<absl::string_view> range = absl::StrSplit(field, '-');
  int a = 0, b = 0;
  if (range.size() == 1 && absl::SimpleAtoi(range[0], &a)) return 1;
  if (range.size() == 2 && absl::SimpleAtoi(range[0], &a) && absl::SimpleAtoi(range[1], &b) &&
      b >= a) {
    return b - a + 1;
  }
  return 0;
}

}  // namespace

ClusterFacts ParseClusterFacts(const std::string& cluster_info,
                               const std::string& cluster_nodes) {
  ClusterFacts f;
  for (absl::string_view line : absl::StrSplit(cluster_info, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "cluster_state:")) f.state = std::string(line);
    if (absl::ConsumePrefix(&line, "cluster_slots_assigned:") &&
        !absl::SimpleAtoi(line, &f.slots_assigned)) {
      f.slots_assigned = -1;
    }
    if (absl::ConsumePrefix(&line, "cluster_slots_ok:") && !absl::SimpleAtoi(line, &f.slots_ok)) {
      f.slots_ok = -1;
    }
  }
  for (absl::string_view line : absl::StrSplit(cluster_nodes, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (w.size() < 8) continue;
    ClusterNodeFacts n;
    n.id = std::string(w[0]);
    n.address = std::string(w[1].substr(0, w[1].find('@')));
    n.master = absl::StrContains(w[2], "master");
    n.failed = absl::StrContains(w[2], "fail");
    if (w[3] != "-") n.master_id = std::string(w[3]);
    for (size_t i = 8; i < w.size(); ++i) n.slots += CountSlots(w[i]);
    f.nodes.push_back(std::move(n));
  }
  return f;
}

std::vector<Finding> AnalyzeCluster(const ClusterFacts& f) {
  using L = Finding::Level;
  std::vector<Finding> out;
  if (f.state == "ok") {
    out.push_back(Make(L::kOk, "cluster_state ok"));
  } else {
    out.push_back(Make(L::kUnsafe,
                       absl::StrCat("cluster_state ", f.state.empty() ? "unknown" : f.state,
                                    ": the cluster refuses commands on uncovered slots")));
  }
  if (f.slots_assigned != kSlots || f.slots_ok != kSlots) {
    out.push_back(Make(L::kUnsafe, absl::StrCat("slots assigned ", f.slots_assigned, ", ok ",
                                                f.slots_ok, " of ", kSlots,
                                                ": resources in the others cannot be locked")));
  } else {
    out.push_back(Make(L::kOk, "all 16384 slots assigned and ok"));
  }
  std::map<std::string, int> replicas;  // master id -> live replicas
  int masters = 0;
  for (const ClusterNodeFacts& n : f.nodes) {
    if (n.master && n.slots > 0) {
      ++masters;
      replicas.emplace(n.id, 0);
    }
  }
  for (const ClusterNodeFacts& n : f.nodes) {
    if (n.failed) {
      out.push_back(Make(L::kWarning, absl::StrCat(n.master ? "master " : "replica ",
                                                   n.address, " is flagged failed")));
    }
    if (!n.master && !n.failed && replicas.count(n.master_id) > 0) ++replicas[n.master_id];
  }
  out.push_back(Make(L::kInfo, absl::StrCat(masters, " masters serving slots, ",
                                            f.nodes.size() - masters, " other nodes")));
  for (const ClusterNodeFacts& n : f.nodes) {
    if (!n.master || n.slots == 0) continue;
    const int r = replicas[n.id];
    if (r == 0) {
      out.push_back(Make(
          L::kWarning,
          absl::StrCat("master ", n.address, " (", n.slots,
                       " slots) has no live replica: if it fails, its slots stop "
                       "until it returns, and without persistence its leases and "
                       "fences are lost")));
    } else {
      out.push_back(Make(
          L::kInfo,
          absl::StrCat("master ", n.address, " (", n.slots, " slots), ", r,
                       r == 1 ? " replica" : " replicas",
                       ": a failover keeps its slots available, but replication is "
                       "asynchronous: a lease granted just before the master died "
                       "can be missing on the promoted replica")));
    }
  }
  return out;
}

std::vector<Finding> AnalyzeClusterMaster(const ServerFacts& facts, absl::Duration ttl) {
  std::vector<Finding> out = AnalyzeServer(facts, /*redlock=*/false, ttl);
  int n = -1;
  if (facts.min_replicas_to_write.has_value() &&
      !absl::SimpleAtoi(*facts.min_replicas_to_write, &n)) {
    n = -1;
  }
  for (Finding& f : AnalyzeMinReplicasToWrite(n)) out.push_back(std::move(f));
  return out;
}

}  // namespace cli
}  // namespace dlock
