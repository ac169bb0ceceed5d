#include "dlock/tests/torture/network_check.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"

namespace dlock {
namespace torture {
namespace {

constexpr size_t kMaxExamples = 5;

double Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  if (rank >= sorted.size()) rank = sorted.size() - 1;
  return static_cast<double>(sorted[rank]) / 1e6;
}

}  // namespace

NetworkReport CheckNetwork(const NetworkInput& in) {
  NetworkReport r;
  r.audits = in.audits;
  r.audit_ghosts = static_cast<int64_t>(in.audit_findings.size());
  for (const AuditFinding& f : in.audit_findings) {
    if (r.examples.size() < kMaxExamples) {
      r.examples.push_back(absl::StrFormat("audit: server %d holds token %s (pttl %d ms)",
                                           f.server, f.token, f.pttl_ms));
    }
  }

  // Live samples.
  struct Lease {
    int64_t grant_ns = 0;
    int64_t released_ns = -1;
  };
  std::map<std::string, Lease> leases;
  for (const CsRecord& c : in.cs) {
    if (!c.token.empty()) leases[c.token].grant_ns = c.start_ns;
  }
  for (const ReleaseRecord& rel : in.releases) {
    auto it = leases.find(rel.token);
    if (it != leases.end()) it->second.released_ns = rel.done_ns;
  }
  std::set<std::pair<int, std::string>> ghosts;
  r.samples = static_cast<int64_t>(in.samples.size());
  for (const KeySample& s : in.samples) {
    auto it = leases.find(s.token);
    if (it == leases.end() || it->second.released_ns < 0) continue;
    const Lease& l = it->second;
    const int64_t from = l.grant_ns - in.ttl_ns;
    bool lossy = false;
    int64_t slack = 0;
    for (const Impairment& im : in.impairments) {
      if (im.server != s.server || im.end_ns <= from || im.start_ns > s.t_ns) continue;
      if (im.loses) lossy = true;
      slack = std::max(slack, im.delay_ns);
    }
    if (lossy) continue;
    ++r.samples_judged;
    if (s.t_ns > l.released_ns + in.release_timeout_ns + slack) {
      if (ghosts.insert({s.server, s.token}).second && r.examples.size() < kMaxExamples) {
        r.examples.push_back(absl::StrFormat(
            "live: server %d still holds token %s %.1f ms after its release completed",
            s.server, s.token, static_cast<double>(s.t_ns - l.released_ns) / 1e6));
      }
    }
  }
  r.live_ghosts = static_cast<int64_t>(ghosts.size());

  // Hand-over times.
  std::vector<int64_t> grants;
  for (const CsRecord& c : in.cs) grants.push_back(c.start_ns);
  std::sort(grants.begin(), grants.end());
  std::vector<int64_t> lat;
  for (const ReleaseRecord& rel : in.releases) {
    auto g = std::upper_bound(grants.begin(), grants.end(), rel.sent_ns);
    if (g == grants.end()) continue;
    bool gated = false;
    for (const auto& [a, b] : in.gates) {
      if (a < *g && b > rel.sent_ns) gated = true;
    }
    if (gated) continue;
    lat.push_back(*g - rel.sent_ns);
  }
  std::sort(lat.begin(), lat.end());
  r.handovers = static_cast<int64_t>(lat.size());
  r.handover_p50_ms = Percentile(lat, 0.50);
  r.handover_p99_ms = Percentile(lat, 0.99);
  r.handover_max_ms = lat.empty() ? 0 : static_cast<double>(lat.back()) / 1e6;
  return r;
}

}  // namespace torture
}  // namespace dlock
