// `dlock check`: gathers ServerFacts from every server with plain commands
// (INFO, CONFIG GET, EVAL, PING) and judges them with AnalyzeServer.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "dlock/cli/check.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"

namespace dlock {
namespace cli {
namespace {

// The value of `field` in an INFO reply ("field:value" lines), or "".
std::string InfoField(const std::string& info, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, field) && absl::ConsumePrefix(&line, ":")) {
      return std::string(line);
    }
  }
  return "";
}

absl::Status ReplyError(const absl::StatusOr<Reply>& r) {
  if (!r.ok()) return r.status();
  if (r->is_error()) return absl::UnavailableError(r->str);
  return absl::OkStatus();
}

// CONFIG GET name -> value, or the error.
absl::StatusOr<std::string> ConfigGet(Session& s, size_t i, const std::string& name) {
  absl::StatusOr<Reply> r = s.Call(i, {"CONFIG", "GET", name});
  absl::Status e = ReplyError(r);
  if (!e.ok()) return e;
  if (!r->is_array() || r->elements.size() != 2) {
    return absl::InternalError(absl::StrCat("CONFIG GET ", name, ": ", r->DebugString()));
  }
  return r->elements[1].str;
}

}  // namespace

int CheckCommand(const CommonOptions& common, absl::Duration ttl, int pings,
                 bool strict) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    return kExitUnavailable;
  }
  Session& s = **session;
  const bool redlock = s.size() > 1;
  int unsafe = 0, warnings = 0, unreachable = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    ServerFacts f;
    f.address = common.urls[i].Display();
    std::printf("%s\n", f.address.c_str());
    absl::StatusOr<Reply> ping = s.Call(i, {"PING"});
    absl::Status e = ReplyError(ping);
    if (!e.ok()) {
      std::printf("  UNREACHABLE  %s\n", e.ToString().c_str());
      std::fprintf(stderr, "dlock: %s: unreachable: %s\n", f.address.c_str(),
                   e.ToString().c_str());
      ++unreachable;
      continue;
    }
    absl::StatusOr<Reply> info = s.Call(i, {"INFO", "server"});
    if (ReplyError(info).ok()) f.version = InfoField(info->str, "redis_version");
    info = s.Call(i, {"INFO", "replication"});
    if (ReplyError(info).ok()) f.role = InfoField(info->str, "role");
    absl::StatusOr<std::string> v = ConfigGet(s, i, "maxmemory-policy");
    if (v.ok()) {
      f.maxmemory_policy = *v;
      for (auto [name, field] :
           {std::make_pair("maxmemory", &f.maxmemory),
            std::make_pair("appendonly", &f.appendonly),
            std::make_pair("appendfsync", &f.appendfsync),
            std::make_pair("save", &f.save)}) {
        absl::StatusOr<std::string> value = ConfigGet(s, i, name);
        if (value.ok()) *field = *value;
      }
    } else {
      f.config_error = v.status();
    }
    absl::StatusOr<Reply> eval = s.Call(i, {"EVAL", "return 1", "0"});
    f.scripting = ReplyError(eval);
    if (f.scripting.ok() && !(eval->is_integer() && eval->integer == 1)) {
      f.scripting = absl::InternalError(absl::StrCat("EVAL returned ", eval->DebugString()));
    }
    for (int p = 0; p < pings; ++p) {
      absl::Time start = s.loop()->Now();
      absl::StatusOr<Reply> r = s.Call(i, {"PING"});
      if (!ReplyError(r).ok()) break;
      f.round_trips.push_back(s.loop()->Now() - start);
    }
    for (const Finding& finding : AnalyzeServer(f, redlock, ttl)) {
      std::printf("  %-6s %s\n", LevelName(finding.level), finding.message.c_str());
      if (finding.level == Finding::Level::kUnsafe) {
        ++unsafe;
        std::fprintf(stderr, "dlock: %s: unsafe: %s\n", f.address.c_str(),
                     finding.message.c_str());
      } else if (finding.level == Finding::Level::kWarning) {
        ++warnings;
      }
    }
  }
  if (redlock) {
    std::printf("RedLock over %zu servers, quorum %zu\n", s.size(), s.size() / 2 + 1);
  }
  const bool fail = unsafe > 0 || (strict && warnings > 0);
  std::printf("result: %s (%d unsafe, %d warning%s, %d unreachable)\n",
              fail ? "UNSAFE" : unreachable ? "INCOMPLETE" : "OK", unsafe,
              warnings, warnings == 1 ? "" : "s", unreachable);
  if (fail) return kExitUnsafe;
  if (unreachable > 0) return kExitUnavailable;
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
