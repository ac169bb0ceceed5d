// `dlock trust [--force] [--redis URL]...`: shows, per server, when dlock's
// data set began (the restart rule's marker, KeyScheme::DataSetKey) and,
// with --force, declares it trusted (marker 0: TrustDataSetCommand). A
// redis-cluster:// URL has one marker per slot (trust_cluster.h).
//
// Why: a server whose data set began less than the restart window ago
// refuses acquires (RedLock always; a single server with --restart-window),
// because it may have lost locks in a restart without persistence. A server
// that has never served a lock (just deployed) is refused the same way for
// one window after first contact, since nothing can tell it from a restarted
// one. An operator who KNOWS the server never served locks, or that its data
// survived, can say so here. Doing it right after a restart that lost data
// is exactly the unsafety the rule exists to prevent: --force is required,
// and the output says so.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"
#include "dlock/cli/trust_cluster.h"
#include "dlock/lock/lock_commands.h"

namespace dlock {
namespace cli {
namespace {

// The server's clock in Unix ms (TIME), or an error.
absl::StatusOr<int64_t> ServerNowMs(Session& s, size_t i) {
  absl::StatusOr<Reply> t = s.Call(i, {"TIME"});
  if (!t.ok()) return t.status();
  int64_t sec = 0, usec = 0;
  if (!t->is_array() || t->elements.size() != 2 ||
      !absl::SimpleAtoi(t->elements[0].str, &sec) ||
      !absl::SimpleAtoi(t->elements[1].str, &usec)) {
    return absl::InternalError(absl::StrCat("unexpected TIME reply ", t->DebugString()));
  }
  return sec * 1000 + usec / 1000;
}

std::string HostPort(const std::string& host, int port) {
  return absl::StrCat(absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : host, ":",
                      port);
}

// `url` as a --redis argument, without its password.
std::string UrlWithoutPassword(const RedisUrl& url) {
  const std::string user = url.user.empty() ? "" : absl::StrCat(url.user, "@");
  std::vector<std::string> nodes;
  switch (url.kind) {
    case RedisUrl::Kind::kUnix:
      return absl::StrCat("unix://", user, url.path,
                          url.db != 0 ? absl::StrCat("?db=", url.db) : "");
    case RedisUrl::Kind::kSentinel:
      for (const RedisUrl::Endpoint& e : url.sentinels) nodes.push_back(HostPort(e.host, e.port));
      return absl::StrCat("redis-sentinel://", user, absl::StrJoin(nodes, ","), "/",
                          url.master_name, url.db != 0 ? absl::StrCat("?db=", url.db) : "");
    case RedisUrl::Kind::kCluster:
      for (const RedisUrl::Endpoint& e : url.seeds) nodes.push_back(HostPort(e.host, e.port));
      return absl::StrCat("redis-cluster://", user, absl::StrJoin(nodes, ","));
    case RedisUrl::Kind::kTcp:
      break;
  }
  return absl::StrCat(url.tls ? "rediss://" : "redis://", user, HostPort(url.host, url.port),
                      url.db != 0 ? absl::StrCat("/", url.db) : "");
}

}  // namespace

std::string TrustCommandLine(const std::vector<RedisUrl>& urls) {
  std::string line = "dlock trust --force";
  for (const RedisUrl& url : urls) absl::StrAppend(&line, " --redis ", UrlWithoutPassword(url));
  return line;
}

std::string YoungDataSetAdvice(absl::Duration left, const std::vector<RedisUrl>& urls) {
  return absl::StrCat(
      "dlock: the servers' data sets are young (the restart rule: a server that may have "
      "restarted empty must not grant a lock it may have granted before), so they refuse "
      "acquires",
      left > absl::ZeroDuration()
          ? absl::StrCat(" for about another ", absl::FormatDuration(left))
          : std::string(" until the restart window (--restart-window) has passed"),
      ". Only if they never held dlock locks (just deployed) or kept their data "
      "(persistence), let them vote now:\n  ",
      TrustCommandLine(urls),
      "\nNever do that right after a restart that lost data: wait instead.");
}

int TrustCommand(const CommonOptions& common, absl::Duration restart_window, bool force) {
  int code = kExitOk;
  std::unique_ptr<Session> session = OpenForCommand(common, &code);
  if (session == nullptr) return code;
  Session& s = *session;
  KeyScheme keys;
  keys.prefix = common.prefix;
  const std::string marker = keys.DataSetKey();
  std::printf("data-set marker %s (restart window %s)\n", marker.c_str(),
              absl::FormatDuration(restart_window).c_str());
  int failed = 0, foreign = 0, untrusted = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string where = common.urls[i].Display();
    if (s.cluster(i) != nullptr) {  // one marker per slot
      absl::StatusOr<int64_t> now = ServerNowMs(s, i);
      TrustCounts c;
      if (!now.ok()) {
        std::printf("  %s: unreachable: %s\n", where.c_str(), now.status().ToString().c_str());
        ++failed;
        continue;
      }
      TrustCluster(s, i, KeyScheme{common.prefix, true}, *now, restart_window, force, &c);
      failed += c.failed;
      foreign += c.foreign;
      untrusted += c.untrusted;
      continue;
    }
    absl::StatusOr<Reply> got = s.Call(i, {"GET", marker});
    absl::StatusOr<int64_t> now = ServerNowMs(s, i);
    if (!got.ok() || !now.ok()) {
      std::printf("  %s: unreachable: %s\n", where.c_str(),
                  (got.ok() ? now.status() : got.status()).ToString().c_str());
      ++failed;
      continue;
    }
    int64_t began = 0;
    std::string state;
    if (got->is_nil()) {
      state = "no marker yet (the first acquire starts the window)";
      ++untrusted;
    } else if (got->is_error() || !got->is_string() || !absl::SimpleAtoi(got->str, &began)) {
      std::printf("  %s: foreign data under %s: %s\n", where.c_str(), marker.c_str(),
                  got->DebugString().c_str());
      ++foreign;
      continue;
    } else if (began == 0) {
      state = "trusted";
    } else {
      const absl::Duration age = absl::Milliseconds(*now - began);
      state = absl::StrCat("data set began ", absl::FormatDuration(age), " ago");
      if (age < restart_window) {
        absl::StrAppend(&state, " (young: refuses acquires for another ",
                        absl::FormatDuration(restart_window - age), ")");
      }
      ++untrusted;
    }
    if (!force || state == "trusted") {
      std::printf("  %s: %s\n", where.c_str(), state.c_str());
      continue;
    }
    absl::StatusOr<Reply> set = s.Call(i, TrustDataSetCommand(keys));
    if (!set.ok() || set->is_error()) {
      std::printf("  %s: %s; FAILED to trust: %s\n", where.c_str(), state.c_str(),
                  set.ok() ? set->str.c_str() : set.status().ToString().c_str());
      ++failed;
      continue;
    }
    std::printf("  %s: %s; now trusted\n", where.c_str(), state.c_str());
  }
  if (foreign > 0) {
    std::fprintf(stderr, "dlock: %s holds foreign data on %d server(s); not touched\n",
                 marker.c_str(), foreign);
    return kExitInternal;
  }
  if (failed > 0) {
    std::fprintf(stderr, "dlock: %d of %zu servers could not be %s\n", failed, s.size(),
                 force ? "trusted" : "read");
    return kExitUnavailable;
  }
  if (!force && untrusted > 0) {
    std::fprintf(stderr,
                 "dlock: to declare these data sets trusted add --force -- ONLY for servers "
                 "that never served locks or whose data survived (persistence). Right after "
                 "a restart that lost data it lets a second holder in while leases granted "
                 "before the restart are still live.\n");
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
