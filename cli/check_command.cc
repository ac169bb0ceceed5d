// `dlock check`: gathers ServerFacts from every server with plain commands
// (INFO, CONFIG GET, EVAL, PUBLISH, PING) and judges them with
// AnalyzeServer; flags entries that are one instance (SameInstanceGroups).
#include <cstdio>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "dlock/cli/check.h"
#include "dlock/cli/check_gather.h"
#include "dlock/cli/check_sentinel.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/uv/hiredis_transport.h"

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
absl::StatusOr<std::string> ConfigGet(Session& s, Transport& t, const std::string& name) {
  absl::StatusOr<Reply> r = s.CallOn(t, {"CONFIG", "GET", name});
  absl::Status e = ReplyError(r);
  if (!e.ok()) return e;
  if (!r->is_array() || r->elements.size() != 2) {
    return absl::InternalError(absl::StrCat("CONFIG GET ", name, ": ", r->DebugString()));
  }
  return r->elements[1].str;
}

// Subscribes to `channel` on transport `t` and waits (bounded by the command
// timeout) for the confirmation: OK, the refusal (ACL NOPERM:
// kPermissionDenied), or kDeadlineExceeded.
absl::Status TrySubscribe(Session& s, Transport& t, const std::string& channel) {
  bool ready = false, timed_out = false;
  absl::Status result;
  absl::StatusOr<std::unique_ptr<Subscription>> sub = t.Subscribe(
      channel, [](absl::string_view, absl::string_view) {},
      [&ready, &result](absl::Status st) {
        result = std::move(st);
        ready = true;
      });
  if (!sub.ok()) return sub.status();
  TimerId timer = s.loop()->RunAfter(s.command_timeout(), [&timed_out] { timed_out = true; });
  s.RunUntil([&] { return ready || timed_out; });
  if (!timed_out) s.loop()->Cancel(timer);
  sub->reset();  // unsubscribes; on_ready will not run any more
  if (!ready) {
    return absl::DeadlineExceededError(absl::StrCat("no SUBSCRIBE confirmation within ",
                                                    absl::FormatDuration(s.command_timeout())));
  }
  if (!result.ok() && absl::StrContains(result.message(), "NOPERM")) {
    return absl::PermissionDeniedError(result.message());
  }
  return result;
}

// What a redis-sentinel:// URL (server `i`) adds: the master's replicas
// and min-replicas-to-write through the session's transport (which talks to
// the master), the sentinels through short-lived connections of their own.
// `master`: the master's ServerFacts (min-replicas-to-write).
SentinelFacts GatherSentinelFacts(Session& s, size_t i, const RedisUrl& url,
                                  const ServerFacts& master) {
  SentinelFacts f;
  f.master_name = url.master_name;
  f.sentinels_listed = static_cast<int>(url.sentinels.size());
  absl::StatusOr<Reply> info = s.Call(i, {"INFO", "replication"});
  if (ReplyError(info).ok()) {
    f.replicas_online = 0;
    for (absl::string_view line : absl::StrSplit(info->str, '\n')) {
      if (absl::StartsWith(line, "slave") && absl::StrContains(line, "state=online")) {
        ++f.replicas_online;
      }
    }
  }
  int n = 0;
  if (master.min_replicas_to_write.has_value() &&
      absl::SimpleAtoi(*master.min_replicas_to_write, &n)) {
    f.min_replicas_to_write = n;
  }
  for (const RedisUrl::Endpoint& e : url.sentinels) {
    HiredisTransportOptions o;
    o.host = e.host;
    o.port = e.port;
    o.username = url.sentinel_user;
    o.password = url.sentinel_password;
    o.connect_timeout = s.command_timeout();
    absl::StatusOr<std::unique_ptr<HiredisTransport>> t = HiredisTransport::Create(s.uv_loop(), o);
    if (!t.ok()) continue;
    auto call = [&](std::vector<std::string> argv) -> absl::StatusOr<Reply> {
      std::optional<absl::StatusOr<Reply>> out;
      absl::Status sent = (*t)->Send(std::move(argv), s.command_timeout(),
                                     [&out](absl::StatusOr<Reply> r) { out = std::move(r); });
      if (!sent.ok()) return sent;
      s.RunUntil([&out] { return out.has_value(); });
      return out.value_or(absl::UnavailableError("no answer"));
    };
    absl::StatusOr<Reply> addr = call({"SENTINEL", "get-master-addr-by-name", url.master_name});
    if (ReplyError(addr).ok()) {
      const bool first = f.sentinels_reachable == 0;
      ++f.sentinels_reachable;
      if (f.master_address.empty() && addr->is_array() && addr->elements.size() == 2) {
        f.master_address = absl::StrCat(addr->elements[0].str, ":", addr->elements[1].str);
      }
      if (first) {
        absl::StatusOr<Reply> q = call({"SENTINEL", "CKQUORUM", url.master_name});
        f.quorum_ok = ReplyError(q).ok();
        f.quorum_answer = q.ok() ? q->str : q.status().ToString();
        absl::StatusOr<Reply> m = call({"SENTINEL", "MASTER", url.master_name});
        if (ReplyError(m).ok() && m->is_array()) {
          for (size_t k = 0; k + 1 < m->elements.size(); k += 2) {
            int v = 0;
            if (!absl::SimpleAtoi(m->elements[k + 1].str, &v)) continue;
            if (m->elements[k].str == "quorum") f.quorum = v;
            if (m->elements[k].str == "num-other-sentinels") f.sentinels_known = v + 1;
          }
        }
      }
    }
    (*t)->Close();
  }
  return f;
}

}  // namespace

absl::Status GatherServerFacts(Session& s, Transport& t, const KeyScheme& keys, int pings,
                               ServerFacts* f) {
  absl::StatusOr<Reply> ping = s.CallOn(t, {"PING"});
  absl::Status e = ReplyError(ping);
  if (!e.ok() && !f->tls && absl::IsUnavailable(e) &&
      (absl::StrContains(e.message(), "reset by peer") ||
       absl::StrContains(e.message(), "closed the connection") ||
       absl::StrContains(e.message(), "Protocol error"))) {
    // What a TLS port does to a plain client's first command.
    e = absl::UnavailableError(absl::StrCat(
        e.message(), " (if ", f->address, " is a TLS port, use rediss://)"));
  }
  if (!e.ok()) return e;
  absl::StatusOr<Reply> info = s.CallOn(t, {"INFO", "server"});
  if (ReplyError(info).ok()) {
    f->version = InfoField(info->str, "redis_version");
    f->run_id = InfoField(info->str, "run_id");
  }
  info = s.CallOn(t, {"INFO", "replication"});
  if (ReplyError(info).ok()) f->role = InfoField(info->str, "role");
  absl::StatusOr<std::string> v = ConfigGet(s, t, "maxmemory-policy");
  if (v.ok()) {
    f->maxmemory_policy = *v;
    for (auto [name, field] :
         {std::make_pair("maxmemory", &f->maxmemory),
          std::make_pair("appendonly", &f->appendonly),
          std::make_pair("appendfsync", &f->appendfsync),
          std::make_pair("save", &f->save),
          std::make_pair("min-replicas-to-write", &f->min_replicas_to_write)}) {
      absl::StatusOr<std::string> value = ConfigGet(s, t, name);
      if (value.ok()) *field = *value;
    }
  } else {
    f->config_error = v.status();
  }
  absl::StatusOr<Reply> eval = s.CallOn(t, {"EVAL", "return 1", "0"});
  f->scripting = ReplyError(eval);
  if (f->scripting.ok() && !(eval->is_integer() && eval->integer == 1)) {
    f->scripting = absl::InternalError(absl::StrCat("EVAL returned ", eval->DebugString()));
  }
  // A PUBLISH on a channel named like the release channels (nobody
  // listens on it): an ACL user without channel permission gets NOPERM.
  absl::StatusOr<Reply> pub =
      s.CallOn(t, {"PUBLISH", keys.ChannelKey("dlock-check"), "check"});
  if (!pub.ok()) {
    f->publish = pub.status();
  } else if (pub->is_error()) {
    f->publish = absl::StartsWith(pub->str, "NOPERM") ? absl::PermissionDeniedError(pub->str)
                                                     : absl::UnavailableError(pub->str);
  } else {
    f->publish = absl::OkStatus();
  }
  f->subscribe = TrySubscribe(s, t, keys.ChannelKey("dlock-check"));
  for (int p = 0; p < pings; ++p) {
    absl::Time start = s.loop()->Now();
    absl::StatusOr<Reply> r = s.CallOn(t, {"PING"});
    if (!ReplyError(r).ok()) break;
    f->round_trips.push_back(s.loop()->Now() - start);
  }
  return absl::OkStatus();
}

void PrintFindings(const std::vector<Finding>& findings, const std::string& address,
                   int* unsafe, int* warnings) {
  for (const Finding& finding : findings) {
    std::printf("  %-6s %s\n", LevelName(finding.level), finding.message.c_str());
    if (finding.level == Finding::Level::kUnsafe) {
      ++*unsafe;
      std::fprintf(stderr, "dlock: %s: unsafe: %s\n", address.c_str(),
                   finding.message.c_str());
    } else if (finding.level == Finding::Level::kWarning) {
      ++*warnings;
    }
  }
}

namespace {

// The restart rule's marker on server `i` (GET and TIME); false when it
// could not be read (the server's other findings say why).
bool GatherDataSetFacts(Session& s, size_t i, const KeyScheme& keys, DataSetFacts* f) {
  f->marker_key = keys.DataSetKey();
  absl::StatusOr<Reply> got = s.Call(i, {"GET", f->marker_key});
  absl::StatusOr<Reply> time = s.Call(i, {"TIME"});
  int64_t sec = 0, usec = 0;
  if (!ReplyError(got).ok() || !ReplyError(time).ok() || !time->is_array() ||
      time->elements.size() != 2 || !absl::SimpleAtoi(time->elements[0].str, &sec) ||
      !absl::SimpleAtoi(time->elements[1].str, &usec)) {
    return false;
  }
  if (!got->is_nil()) f->marker = got->str;
  f->server_now_ms = sec * 1000 + usec / 1000;
  return true;
}

}  // namespace

int CheckCommand(const CommonOptions& common, absl::Duration ttl, int pings,
                 bool strict, absl::Duration restart_window) {
  int code = kExitOk;
  std::unique_ptr<Session> session = OpenForCommand(common, &code);
  if (session == nullptr) return code;
  Session& s = *session;
  const bool redlock = s.size() > 1;
  int unsafe = 0, warnings = 0, unreachable = 0;
  KeyScheme keys;
  keys.prefix = common.prefix;
  std::vector<std::string> run_ids(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    ServerFacts f;
    f.address = common.urls[i].Display();
    f.tls = common.urls[i].tls;
    f.tls_insecure_skip_verify = f.tls && common.tls.insecure_skip_verify;
    std::printf("%s\n", f.address.c_str());
    if (s.cluster(i) != nullptr) {
      CheckCluster(s, i, keys, ttl, pings, &unsafe, &warnings, &unreachable);
      continue;
    }
    absl::Status e = GatherServerFacts(s, *s.transport(i), keys, pings, &f);
    if (!e.ok()) {
      std::printf("  UNREACHABLE  %s\n", e.ToString().c_str());
      std::fprintf(stderr, "dlock: %s: unreachable: %s\n", f.address.c_str(),
                   e.ToString().c_str());
      ++unreachable;
      continue;
    }
    run_ids[i] = f.run_id;
    std::vector<Finding> findings = AnalyzeServer(f, redlock, ttl);
    if (DataSetFacts d; GatherDataSetFacts(s, i, keys, &d)) {
      for (Finding& extra :
           AnalyzeDataSet(d, restart_window, TrustCommandLine({common.urls[i]}))) {
        findings.push_back(std::move(extra));
      }
    }
    if (common.urls[i].kind == RedisUrl::Kind::kSentinel) {
      for (Finding& extra : AnalyzeSentinel(GatherSentinelFacts(s, i, common.urls[i], f))) {
        findings.push_back(std::move(extra));
      }
    }
    PrintFindings(findings, f.address, &unsafe, &warnings);
  }
  for (const std::vector<size_t>& group : SameInstanceGroups(run_ids)) {
    std::string names;
    for (size_t i : group) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", common.urls[i].Display());
    }
    std::string message = absl::StrCat(
        names, " are the same Redis instance (run_id ", run_ids[group[0]],
        "): different host names or DB numbers do not make separate servers; "
        "RedLock needs independent servers (it would count one instance's vote ",
        group.size(), " times)");
    std::printf("UNSAFE %s\n", message.c_str());
    std::fprintf(stderr, "dlock: unsafe: %s\n", message.c_str());
    ++unsafe;
  }
  if (redlock) {
    std::printf("RedLock over %zu servers, quorum %zu\n", s.size(), s.size() / 2 + 1);
  }
  const bool fail = unsafe > 0 || (strict && warnings > 0);
  std::printf("%s\n", CheckResultLine(unsafe, warnings, unreachable, strict).c_str());
  if (fail) return kExitUnsafe;
  if (unreachable > 0) return kExitUnavailable;
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
