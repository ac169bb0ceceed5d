#include "dlock/tests/torture/primitive_check.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace dlock {
namespace torture {

absl::StatusOr<std::vector<Attempt>> ParseAttempts(absl::string_view log, int worker,
                                                   int incarnation, bool reader,
                                                   const std::vector<int>& resources,
                                                   int64_t died_ns) {
  std::vector<Attempt> out;
  std::map<int64_t, size_t> by_seq;
  std::vector<absl::string_view> lines = absl::StrSplit(log, '\n');
  // The last piece is "" after a final newline, or a line cut short by a
  // kill -9: neither is a record.
  if (!lines.empty()) lines.pop_back();
  int line_no = 0;
  for (absl::string_view line : lines) {
    ++line_no;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto bad = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", worker, ".", incarnation, " log line ", line_no, ": \"", line,
                       "\""));
    };
    if (f.empty()) return bad();
    if (f[0] == "done") continue;
    std::vector<int64_t> v;
    for (size_t i = 1; i < f.size(); ++i) {
      int64_t x;
      if (!absl::SimpleAtoi(f[i], &x)) return bad();
      v.push_back(x);
    }
    if (v.empty()) return bad();
    if (f[0] == "ask") {
      if (v.size() != 2 || by_seq.count(v[0]) != 0) return bad();
      Attempt a;
      a.worker = worker;
      a.incarnation = incarnation;
      a.seq = v[0];
      a.reader = reader;
      a.resources = resources;
      a.ask_ns = v[1];
      by_seq[a.seq] = out.size();
      out.push_back(std::move(a));
      continue;
    }
    auto it = by_seq.find(v[0]);
    if (it == by_seq.end()) return bad();
    Attempt& a = out[it->second];
    if (f[0] == "queued" && v.size() == 2) {
      if (a.queued_ns < 0) a.queued_ns = v[1];
    } else if (f[0] == "grant" && v.size() == 4 && a.grant_ns < 0 && !a.failed) {
      a.grant_ns = v[1];
      a.deadline_ns = v[2];
      a.valid_until_ns = v[2];
      a.fence = v[3];
    } else if (f[0] == "end" && v.size() == 4 && a.grant_ns >= 0 && a.end_ns < 0) {
      a.end_ns = v[1];
      a.valid_until_ns = v[2];
      a.lost = v[3] != 0;
    } else if (f[0] == "fail" && v.size() == 5 && a.grant_ns < 0 && !a.failed) {
      a.failed = true;
      a.end_ns = v[1];
      a.failure_code = static_cast<int>(v[2]);
      a.left = static_cast<int>(v[3]);
      a.unknown = static_cast<int>(v[4]);
    } else {
      return bad();
    }
  }
  for (Attempt& a : out) {
    if (a.end_ns >= 0) continue;
    if (died_ns < 0) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", worker, ".", incarnation,
                                                     " exited with attempt ", a.seq, " open"));
    }
    // Killed while waiting or holding: it did nothing after its death. Its
    // validity is what it last logged (renewals after the grant are not
    // logged, so this can only understate it).
    a.end_ns = std::max(died_ns, a.ask_ns);
  }
  return out;
}

namespace {

struct Interval {
  int64_t start, end;
  bool exclusive;
  const Attempt* who;
};

std::string Describe(const Attempt& a) {
  const char* role = a.reader ? "reader" : "holder";
  if (a.grant_ns < 0) {
    return absl::StrFormat("worker %d.%d #%d (%s, asked %.3f ms, %s %.3f)", a.worker,
                           a.incarnation, a.seq, role, a.ask_ns / 1e6,
                           a.failed ? "failed" : "ended", a.end_ns / 1e6);
  }
  return absl::StrFormat("worker %d.%d #%d (%s, granted %.3f ms, ended %.3f, valid to %.3f%s)",
                         a.worker, a.incarnation, a.seq, role, a.grant_ns / 1e6,
                         a.end_ns / 1e6, a.valid_until_ns / 1e6, a.lost ? ", lost" : "");
}

// Sweeps one resource's intervals: the grants that entered a forbidden
// state (more than `capacity` holders, or an exclusive holder beside any
// other) and the most holders at once. Half-open intervals: at equal times
// an end comes before a start.
std::pair<int64_t, int64_t> Sweep(std::vector<Interval> v, int64_t capacity,
                                  std::vector<std::string>* examples) {
  std::vector<std::tuple<int64_t, int, size_t>> ev;  // time, 0 end / 1 start, index
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].start >= v[i].end) continue;
    ev.emplace_back(v[i].start, 1, i);
    ev.emplace_back(v[i].end, 0, i);
  }
  std::sort(ev.begin(), ev.end());
  std::vector<size_t> active;
  int64_t conflicts = 0, most = 0, exclusive = 0;
  for (const auto& [t, kind, i] : ev) {
    if (kind == 0) {
      active.erase(std::find(active.begin(), active.end(), i));
      exclusive -= v[i].exclusive;
      continue;
    }
    active.push_back(i);
    exclusive += v[i].exclusive;
    const int64_t n = static_cast<int64_t>(active.size());
    most = std::max(most, n);
    if (n > capacity || (exclusive >= 1 && n >= 2)) {
      ++conflicts;
      if (examples != nullptr && examples->size() < 5) {
        std::string s = absl::StrCat(Describe(*v[i].who), " entered beside");
        for (size_t j : active) {
          if (j != i) absl::StrAppend(&s, " ", Describe(*v[j].who));
        }
        examples->push_back(std::move(s));
      }
    }
  }
  return {conflicts, most};
}

bool Excused(const Attempt& a, const Attempt& b, const std::vector<FaultWindow>& faults,
             const CheckParams& p) {
  const int64_t rejoin = p.queue_ttl_ns;
  const int64_t expiry = std::min(p.queue_ttl_ns, p.ttl_ns) / 2;
  for (const FaultWindow& f : faults) {
    if (f.kind == FaultWindow::kServerRestart) {
      if (f.start_ns <= b.grant_ns && b.ask_ns <= f.end_ns + rejoin) return true;
    } else if (f.kind == FaultWindow::kPause && f.worker == a.worker &&
               f.incarnation == a.incarnation && f.start_ns >= a.queued_ns &&
               f.start_ns + expiry <= b.grant_ns && b.ask_ns <= f.end_ns + rejoin) {
      return true;
    }
  }
  return false;
}

}  // namespace

PrimitiveReport CheckPrimitive(const std::vector<Attempt>& attempts,
                               const std::vector<FaultWindow>& faults,
                               const CheckParams& p) {
  PrimitiveReport r;
  std::map<int, std::vector<Interval>> raw, valid;
  for (const Attempt& a : attempts) {
    ++r.attempts;
    if (a.failed) ++r.failures;
    r.subset_left += a.left;
    r.subset_unknown += a.unknown;
    if (a.left > 0 && r.examples.size() < 5) {
      r.examples.push_back(absl::StrCat(Describe(a), ": ", a.left,
                                        " sub-lease(s) still held after the failure callback"));
    }
    if (a.grant_ns < 0) continue;
    ++r.grants;
    r.lost += a.lost;
    const bool exclusive = p.kind == "rw" ? !a.reader : p.kind != "semaphore";
    for (int res : a.resources) {
      raw[res].push_back({a.grant_ns, a.end_ns, exclusive, &a});
      valid[res].push_back({a.grant_ns, std::min(a.end_ns, a.valid_until_ns), exclusive, &a});
    }
  }
  const int64_t capacity =
      p.kind == "semaphore" ? p.permits : std::numeric_limits<int64_t>::max();
  for (auto& [res, v] : raw) {
    auto [c, most] = Sweep(v, capacity, nullptr);
    r.raw_conflicts += c;
    r.max_raw_holders = std::max(r.max_raw_holders, most);
  }
  for (auto& [res, v] : valid) {
    auto [c, most] = Sweep(v, capacity, &r.examples);
    r.violations += c;
    r.max_valid_holders = std::max(r.max_valid_holders, most);
  }
  if (p.kind == "fair") {
    for (const Attempt& a : attempts) {
      if (a.queued_ns < 0) continue;
      ++r.queued_waits;
      const int64_t a_done = a.grant_ns >= 0 ? a.grant_ns : a.end_ns;
      for (const Attempt& b : attempts) {
        if (&a == &b || b.grant_ns < 0) continue;
        if (!(a.queued_ns < b.ask_ns && b.grant_ns < a_done)) continue;
        ++r.overtakes;
        if (Excused(a, b, faults, p)) {
          ++r.overtakes_excused;
          continue;
        }
        ++r.fifo_violations;
        if (r.examples.size() < 5) {
          r.examples.push_back(absl::StrFormat(
              "%s asked at %.3f ms and was granted before %s, queued at %.3f ms",
              Describe(b), b.ask_ns / 1e6, Describe(a), a.queued_ns / 1e6));
        }
      }
    }
  }
  return r;
}

}  // namespace torture
}  // namespace dlock
