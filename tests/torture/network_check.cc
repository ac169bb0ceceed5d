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
  struct Lease {
    int64_t grant_ns = 0;
    int64_t released_ns = -1;
    bool released_ok = false;
  };
  std::map<std::string, Lease> leases;
  for (const CsRecord& c : in.cs) {
    if (!c.token.empty()) leases[c.token].grant_ns = c.start_ns;
  }
  for (const ReleaseRecord& rel : in.releases) {
    auto it = leases.find(rel.token);
    if (it != leases.end()) {
      it->second.released_ns = rel.done_ns;
      it->second.released_ok = rel.code == absl::StatusCode::kOk;
    }
  }

  r.audits = in.audits;
  std::set<std::pair<int, std::string>> all_ghosts;
  for (const AuditFinding& f : in.audit_findings) {
    auto it = leases.find(f.token);
    const int64_t from = (it == leases.end() ? f.t_ns : it->second.grant_ns) - in.ttl_ns;
    bool reset = false;
    for (const Impairment& im : in.impairments) {
      if (im.server == f.server && im.resets && im.end_ns > from && im.start_ns <= f.t_ns) {
        reset = true;
      }
    }
    const bool maybe_lost =
        it == leases.end() || !it->second.released_ok || !in.single_server;
    if (reset && maybe_lost) {
      ++r.left_by_resets;
      continue;
    }
    if (!all_ghosts.insert({f.server, f.token}).second) continue;  // found again
    ++r.audit_ghosts;
    if (r.examples.size() >= kMaxExamples) continue;
    std::string whose =
        it == leases.end() ? "of no granted lease (an attempt that failed or lost)"
        : it->second.released_ns < 0
            ? "of a granted lease never released"
            : absl::StrFormat("of a lease released %.1f ms before",
                              static_cast<double>(f.t_ns - it->second.released_ns) / 1e6);
    r.examples.push_back(absl::StrFormat("audit: server %d holds token %s %s (pttl %d ms)",
                                         f.server, f.token, whose, f.pttl_ms));
  }

  // Live samples.
  std::set<std::pair<int, std::string>> ghosts;
  std::map<std::pair<int, std::string>, int64_t> last_seen;
  for (const KeySample& s : in.samples) {
    int64_t& t = last_seen[{s.server, s.token}];
    t = std::max(t, s.t_ns);
  }
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
      slack = std::max(slack, kRoundTrips * im.delay_ns);
    }
    if (lossy) continue;
    ++r.samples_judged;
    if (s.t_ns > l.released_ns + in.release_timeout_ns + slack) {
      if (ghosts.insert({s.server, s.token}).second && r.examples.size() < kMaxExamples) {
        r.examples.push_back(absl::StrFormat(
            "live: server %d still holds token %s %.1f ms after its release completed "
            "(seen until %.1f ms after)",
            s.server, s.token, static_cast<double>(s.t_ns - l.released_ns) / 1e6,
            static_cast<double>(last_seen[{s.server, s.token}] - l.released_ns) / 1e6));
      }
    }
  }
  r.live_ghosts = static_cast<int64_t>(ghosts.size());
  all_ghosts.insert(ghosts.begin(), ghosts.end());
  r.distinct_ghosts = static_cast<int64_t>(all_ghosts.size());

  // Hand-over times.
  std::vector<int64_t> grants;
  for (const CsRecord& c : in.cs) grants.push_back(c.start_ns);
  std::sort(grants.begin(), grants.end());
  std::vector<int64_t> lat;
  for (const ReleaseRecord& rel : in.releases) {
    auto g = std::upper_bound(grants.begin(), grants.end(), rel.sent_ns);
    if (g == grants.end()) continue;
    // Time the gate held every acquisition does not count.
    int64_t held = 0;
    for (const auto& [a, b] : in.gates) {
      held += std::max<int64_t>(0, std::min(b, *g) - std::max(a, rel.sent_ns));
    }
    lat.push_back(*g - rel.sent_ns - held);
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
