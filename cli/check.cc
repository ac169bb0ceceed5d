#include "dlock/cli/check.h"

#include <algorithm>
#include <tuple>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace dlock {
namespace cli {
namespace {

Finding Make(Finding::Level level, std::string message) {
  Finding f;
  f.level = level;
  f.message = std::move(message);
  return f;
}

}  // namespace

std::vector<Finding> AnalyzeMinReplicasToWrite(int n) {
  if (n == 0) {
    return {Make(Finding::Level::kWarning,
                 "min-replicas-to-write 0: a master cut off from its replicas keeps "
                 "granting locks that the failover replacing it will not have (set "
                 "min-replicas-to-write on the data nodes, or run with --min-replicas)")};
  }
  if (n > 0) return {Make(Finding::Level::kOk, absl::StrCat("min-replicas-to-write ", n))};
  return {};
}

std::string CheckResultLine(int unsafe, int warnings, int unreachable, bool strict) {
  const bool strict_fail = unsafe == 0 && strict && warnings > 0;
  const char* word = unsafe > 0 || strict_fail ? "UNSAFE" : unreachable > 0 ? "INCOMPLETE" : "OK";
  std::string line = absl::StrCat("result: ", word);
  if (strict_fail) absl::StrAppend(&line, " under --strict");
  const char* plural = warnings == 1 ? "" : "s";
  if (unsafe == 0 && !strict_fail && unreachable == 0 && warnings > 0) {
    absl::StrAppend(&line, " with ", warnings, " warning", plural);
  }
  absl::StrAppend(&line, " (", unsafe, " unsafe, ", warnings, " warning", plural, ", ",
                  unreachable, " unreachable)");
  return line;
}

const char* LevelName(Finding::Level level) {
  switch (level) {
    case Finding::Level::kOk:
      return "ok";
    case Finding::Level::kInfo:
      return "info";
    case Finding::Level::kWarning:
      return "WARN";
    case Finding::Level::kUnsafe:
      return "UNSAFE";
  }
  return "?";
}

bool ParseVersion(const std::string& text, int* major, int* minor, int* patch) {
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (parts.size() < 2 || parts.size() > 3) return false;
  int v[3] = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtoi(parts[i], &v[i]) || v[i] < 0) return false;
  }
  *major = v[0];
  *minor = v[1];
  *patch = v[2];
  return true;
}

std::vector<Finding> AnalyzeServer(const ServerFacts& f, bool redlock,
                                   absl::Duration ttl) {
  using L = Finding::Level;
  std::vector<Finding> out;

  int major = 0, minor = 0, patch = 0;
  if (f.version.empty() || !ParseVersion(f.version, &major, &minor, &patch)) {
    out.push_back(Make(L::kWarning, absl::StrCat("version unknown (\"", f.version,
                                                 "\"): could not read INFO server")));
  } else if (std::make_tuple(major, minor, patch) < std::make_tuple(2, 6, 12)) {
    out.push_back(Make(L::kUnsafe,
                       absl::StrCat("version ", f.version,
                                    ": dlock needs Redis 2.6.12 or later "
                                    "(EVAL, SET NX PX)")));
  } else {
    out.push_back(Make(L::kOk, absl::StrCat("version ", f.version)));
  }

  if (f.role.empty()) {
    out.push_back(Make(L::kWarning, "role unknown: could not read INFO replication"));
  } else if (f.role != "master") {
    out.push_back(Make(L::kUnsafe,
                       absl::StrCat("role ", f.role,
                                    ": a replica refuses writes (READONLY); "
                                    "point dlock at the master")));
  } else {
    out.push_back(Make(L::kOk, "role master"));
  }

  if (f.scripting.ok()) {
    out.push_back(Make(L::kOk, "scripting: EVAL works"));
  } else {
    out.push_back(Make(L::kUnsafe,
                       absl::StrCat("scripting unavailable (", f.scripting.message(),
                                    "): every dlock primitive is a Lua script")));
  }

  if (!f.maxmemory_policy.has_value()) {
    out.push_back(Make(
        L::kWarning,
        absl::StrCat("maxmemory-policy unreadable (", f.config_error.message(),
                     "): make sure it is noeviction, or lock keys may be "
                     "evicted")));
  } else {
    const std::string& p = *f.maxmemory_policy;
    std::string limit =
        f.maxmemory.has_value() && *f.maxmemory == "0"
            ? " (maxmemory is 0 now, but any limit set later makes it evict)"
            : "";
    if (p == "noeviction") {
      out.push_back(Make(L::kOk, "maxmemory-policy noeviction: lock keys are never evicted"));
    } else if (absl::StartsWith(p, "allkeys-")) {
      out.push_back(Make(L::kUnsafe,
                         absl::StrCat("maxmemory-policy ", p,
                                      ": may evict any key, lock keys "
                                      "included, under memory pressure; set "
                                      "noeviction",
                                      limit)));
    } else if (absl::StartsWith(p, "volatile-")) {
      out.push_back(Make(L::kUnsafe,
                         absl::StrCat("maxmemory-policy ", p,
                                      ": evicts keys that have a TTL, and "
                                      "every lock key has one; set noeviction",
                                      limit)));
    } else {
      out.push_back(Make(L::kWarning,
                         absl::StrCat("maxmemory-policy ", p,
                                      ": unknown policy; noeviction is the "
                                      "safe one")));
    }
  }

  std::string aof = f.appendonly.value_or("?");
  std::string fsync = f.appendfsync.value_or("?");
  std::string persistence =
      absl::StrCat("persistence: appendonly ", aof, ", appendfsync ", fsync,
                   ", save \"", f.save.value_or("?"), "\"");
  if (redlock) {
    if (aof == "yes" && fsync == "always") {
      out.push_back(Make(L::kOk, absl::StrCat(persistence,
                                              ": a restart keeps every lock")));
    } else {
      out.push_back(Make(
          L::kWarning,
          absl::StrCat(persistence,
                       ": under RedLock a restarted server may forget locks "
                       "and let a second holder win; restart a crashed server "
                       "only after the longest lock TTL has passed (delayed "
                       "restart), or use appendonly yes + appendfsync always")));
    }
  } else {
    out.push_back(Make(L::kInfo,
                       absl::StrCat(persistence,
                                    aof == "yes" && fsync == "always"
                                        ? ""
                                        : ": a restart may drop locks; holders "
                                          "learn it at their next renewal")));
  }

  if (f.publish.has_value()) {
    if (f.publish->ok()) {
      out.push_back(Make(L::kOk, "PUBLISH on the release channels: allowed (releases wake waiters)"));
    } else {
      out.push_back(Make(
          L::kWarning,
          absl::StrCat("PUBLISH on the release channels refused (", f.publish->message(),
                       "): releases still work, but waiters are not woken and fall back "
                       "to their retry backoff; grant the user the channels (e.g. ",
                       "&dlock:* or allchannels)")));
    }
  }

  if (f.subscribe.has_value()) {
    if (f.subscribe->ok()) {
      out.push_back(Make(L::kOk, "SUBSCRIBE to the release channels: allowed (waiters are woken)"));
    } else {
      out.push_back(Make(
          L::kWarning,
          absl::StrCat("SUBSCRIBE to the release channels failed (", f.subscribe->message(),
                       "): locks still work, but waiters cannot listen for releases and "
                       "fall back to their retry backoff")));
    }
  }

  if (f.tls && f.tls_insecure_skip_verify) {
    out.push_back(Make(L::kWarning,
                       "TLS without certificate verification "
                       "(--tls-insecure-skip-verify): the connection is encrypted but "
                       "not authenticated; anyone in the middle can read the "
                       "password and tokens and answer for the server"));
  } else if (f.tls) {
    out.push_back(Make(L::kOk, "TLS: server certificate verified"));
  }

  if (f.round_trips.empty()) {
    out.push_back(Make(L::kWarning, "latency: no round trip measured"));
  } else {
    std::vector<absl::Duration> sorted = f.round_trips;
    std::sort(sorted.begin(), sorted.end());
    absl::Duration median = sorted[sorted.size() / 2];
    absl::Duration max = sorted.back();
    std::string text = absl::StrCat(
        "latency: median ", absl::FormatDuration(median), ", max ",
        absl::FormatDuration(max), " over ", sorted.size(), " round trips");
    if (max > ttl / 10) {
      out.push_back(Make(L::kWarning,
                         absl::StrCat(text, ": above a tenth of the ttl (",
                                      absl::FormatDuration(ttl),
                                      "); leases lose much of their validity "
                                      "in transit")));
    } else {
      out.push_back(Make(L::kOk, text));
    }
  }
  return out;
}

std::vector<Finding> AnalyzeDataSet(const DataSetFacts& f, absl::Duration restart_window,
                                    const std::string& trust_command) {
  using L = Finding::Level;
  if (restart_window <= absl::ZeroDuration()) return {};
  // When it is safe to skip the window: the same words as `dlock trust`.
  const std::string advice = absl::StrCat(
      "; only if this server never held dlock locks (just deployed) or kept its data "
      "(persistence), let it vote now: ",
      trust_command, " (never right after a restart that lost data: wait instead)");
  if (!f.marker.has_value()) {
    return {Make(L::kWarning,
                 absl::StrCat("data set: no marker ", f.marker_key,
                              " yet: the first acquire starts the restart window (",
                              absl::FormatDuration(restart_window),
                              "), during which this server refuses every acquire", advice))};
  }
  int64_t began = 0;
  if (!absl::SimpleAtoi(*f.marker, &began)) {
    return {Make(L::kUnsafe, absl::StrCat("data set: foreign data under the marker ",
                                          f.marker_key, " (\"", *f.marker,
                                          "\"): every acquire fails"))};
  }
  if (began == 0) return {Make(L::kOk, "data set: trusted (restart rule)")};
  const absl::Duration age = absl::Milliseconds(f.server_now_ms - began);
  if (age >= restart_window) {
    return {Make(L::kOk, absl::StrCat("data set began ", absl::FormatDuration(age),
                                      " ago: older than the restart window"))};
  }
  return {Make(L::kWarning,
               absl::StrCat("data set began ", absl::FormatDuration(age), " ago (",
                            f.marker_key, "): young, refuses every acquire for another ",
                            absl::FormatDuration(restart_window - age),
                            " (restart window ", absl::FormatDuration(restart_window), ")",
                            advice))};
}

std::vector<std::vector<size_t>> SameInstanceGroups(const std::vector<std::string>& run_ids) {
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> taken(run_ids.size(), false);
  for (size_t i = 0; i < run_ids.size(); ++i) {
    if (taken[i] || run_ids[i].empty()) continue;
    std::vector<size_t> group = {i};
    for (size_t j = i + 1; j < run_ids.size(); ++j) {
      if (!taken[j] && run_ids[j] == run_ids[i]) {
        group.push_back(j);
        taken[j] = true;
      }
    }
    if (group.size() > 1) groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace cli
}  // namespace dlock
