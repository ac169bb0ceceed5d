#include "dlock/transport/uv/redis_url.h"

#include <cstdlib>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"

namespace dlock {
namespace {

// `url` with its user:password part (if any) replaced by "***", so an error
// message never repeats a secret into logs or a terminal.
// A sentinel URL's sentinel_password=... parameter is masked the same way.
std::string Redacted(absl::string_view url) {
  std::string out(url);
  const size_t scheme = out.find("://");
  if (scheme == std::string::npos) return out;
  constexpr absl::string_view kParam = "sentinel_password=";
  const size_t param = out.find(std::string(kParam), scheme);
  if (param != std::string::npos) {
    const size_t from = param + kParam.size();
    const size_t end = out.find('&', from);
    out.replace(from, end == std::string::npos ? std::string::npos : end - from, "***");
  }
  const size_t query = out.find('?', scheme);
  const size_t at = out.rfind('@', query == std::string::npos ? std::string::npos : query);
  if (at == std::string::npos || at < scheme) return out;
  return absl::StrCat(out.substr(0, scheme + 3), "***", out.substr(at));
}

absl::Status Bad(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad Redis URL \"", Redacted(url), "\": ", why,
                   " (expected redis://[user:password@]host:port[/db], "
                   "rediss://[user:password@]host:port[/db] or "
                   "unix:///path/to/redis.sock[?db=N] or "
                   "redis-sentinel://[user:password@]host:26379[,host:port...]/"
                   "mastername[?db=N&sentinel_user=U&sentinel_password=P])"));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) {
      return absl::InvalidArgumentError("truncated %-escape");
    }
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("bad %-escape");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

absl::Status ParseDb(absl::string_view url, absl::string_view text, int* db) {
  if (text.empty()) return absl::OkStatus();
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 0 ||
      !absl::c_all_of(text, [](char c) { return absl::ascii_isdigit(c); })) {
    return Bad(url, absl::StrCat("database \"", text,
                                 "\" is not a non-negative number"));
  }
  *db = v;
  return absl::OkStatus();
}

// Splits "[user[:password]@]rest" into userinfo and rest.
absl::Status ParseUserInfo(absl::string_view url, absl::string_view* rest,
                           RedisUrl* out) {
  size_t at = rest->rfind('@');
  if (at == absl::string_view::npos) return absl::OkStatus();
  absl::string_view info = rest->substr(0, at);
  *rest = rest->substr(at + 1);
  absl::string_view user = info, password;
  bool has_password = false;
  size_t colon = info.find(':');
  if (colon != absl::string_view::npos) {
    user = info.substr(0, colon);
    password = info.substr(colon + 1);
    has_password = true;
  }
  absl::StatusOr<std::string> u = PercentDecode(user);
  if (!u.ok()) return Bad(url, absl::StrCat("user: ", u.status().message()));
  absl::StatusOr<std::string> p = PercentDecode(password);
  if (!p.ok()) return Bad(url, absl::StrCat("password: ", p.status().message()));
  out->user = *std::move(u);
  out->password = *std::move(p);
  if (has_password && out->password.empty()) {
    return Bad(url, "empty password after ':'");
  }
  return absl::OkStatus();
}

// Parses "host[:port]" or "[v6]:port" (from `url`, for messages) into
// *host and *port (left unchanged when the text has no port).
absl::Status ParseHostPort(absl::string_view url, absl::string_view authority,
                           std::string* host_out, int* port_out) {
  absl::string_view host = authority, port;
  bool has_port = false;
  if (absl::ConsumePrefix(&host, "[")) {
    size_t close = host.find(']');
    if (close == absl::string_view::npos) {
      return Bad(url, "unterminated '[' in IPv6 host");
    }
    absl::string_view after = host.substr(close + 1);
    host = host.substr(0, close);
    if (!after.empty()) {
      if (after[0] != ':') return Bad(url, "junk after ']'");
      port = after.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = host.rfind(':');
    if (colon != absl::string_view::npos) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
      has_port = true;
    }
  }
  if (host.empty()) return Bad(url, "missing host");
  if (absl::StrContains(host, ':') && !absl::StrContains(authority, '[')) {
    return Bad(url, "an IPv6 host must be in brackets");
  }
  *host_out = std::string(host);
  if (has_port) {
    int p = 0;
    if (port.empty() || !absl::SimpleAtoi(port, &p) || p < 1 || p > 65535 ||
        !absl::c_all_of(port, [](char c) { return absl::ascii_isdigit(c); })) {
      return Bad(url, absl::StrCat("port \"", port,
                                   "\" is not a number in 1..65535"));
    }
    *port_out = p;
  }
  return absl::OkStatus();
}

// redis-sentinel://[[user]:password@]h1[:port],h2[:port]/master[?params]
// (see redis_url.h): everything after the scheme.
absl::Status ParseSentinel(absl::string_view url, absl::string_view rest,
                           RedisUrl* out) {
  out->kind = RedisUrl::Kind::kSentinel;
  size_t q = rest.find('?');
  absl::string_view query;
  if (q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash + 1 == rest.size()) {
    return Bad(url, "missing master name (redis-sentinel://host:26379/mymaster)");
  }
  absl::string_view authority = rest.substr(0, slash);
  if (absl::StrContains(rest.substr(slash + 1), '/')) {
    return Bad(url, "junk after the master name");
  }
  absl::StatusOr<std::string> name = PercentDecode(rest.substr(slash + 1));
  if (!name.ok()) return Bad(url, absl::StrCat("master name: ", name.status().message()));
  out->master_name = *std::move(name);
  absl::Status s = ParseUserInfo(url, &authority, out);
  if (!s.ok()) return s;
  for (absl::string_view one : absl::StrSplit(authority, ',')) {
    RedisUrl::Endpoint e;
    e.port = 26379;
    s = ParseHostPort(url, one, &e.host, &e.port);
    if (!s.ok()) return s;
    out->sentinels.push_back(std::move(e));
  }
  for (absl::string_view param : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t eq = param.find('=');
    absl::string_view key = param.substr(0, eq);
    absl::StatusOr<std::string> value =
        PercentDecode(eq == absl::string_view::npos ? "" : param.substr(eq + 1));
    if (!value.ok()) return Bad(url, absl::StrCat(key, ": ", value.status().message()));
    if (key == "db") {
      s = ParseDb(url, *value, &out->db);
      if (!s.ok()) return s;
    } else if (key == "sentinel_user") {
      out->sentinel_user = *std::move(value);
    } else if (key == "sentinel_password") {
      out->sentinel_password = *std::move(value);
    } else {
      return Bad(url, absl::StrCat("unknown parameter \"", key,
                                   "\" (db, sentinel_user, sentinel_password)"));
    }
  }
  if (!out->sentinel_user.empty() && out->sentinel_password.empty() &&
      std::getenv(kSentinelPasswordEnv) == nullptr) {
    return Bad(url, "sentinel_user without sentinel_password");
  }
  return absl::OkStatus();
}

}  // namespace

std::string RedisUrl::Display() const {
  std::string where;
  if (kind == Kind::kSentinel) {
    where = "sentinel:";
    for (size_t i = 0; i < sentinels.size(); ++i) {
      const Endpoint& e = sentinels[i];
      absl::StrAppend(&where, i == 0 ? "" : ",",
                      absl::StrContains(e.host, ':') ? absl::StrCat("[", e.host, "]")
                                                     : e.host,
                      ":", e.port);
    }
    absl::StrAppend(&where, "/", master_name);
    if (db != 0) absl::StrAppend(&where, "?db=", db);
    return where;
  }
  if (kind == Kind::kCluster) {
    std::vector<std::string> nodes;
    for (const Endpoint& e : seeds) {
      nodes.push_back(absl::StrContains(e.host, ':') ? absl::StrCat("[", e.host, "]:", e.port)
                                                     : absl::StrCat(e.host, ":", e.port));
    }
    return absl::StrCat("cluster:", absl::StrJoin(nodes, ","));
  }
  if (kind == Kind::kUnix) {
    where = absl::StrCat("unix:", path);
  } else if (absl::StrContains(host, ':')) {
    where = absl::StrCat("[", host, "]:", port);
  } else {
    where = absl::StrCat(host, ":", port);
  }
  if (tls) where = absl::StrCat("tls:", where);
  if (db != 0) absl::StrAppend(&where, "/", db);
  return where;
}

absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url,
                                       const char* password_env) {
  RedisUrl out;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "redis://")) {
    out.kind = RedisUrl::Kind::kTcp;
  } else if (absl::ConsumePrefix(&rest, "unix://")) {
    out.kind = RedisUrl::Kind::kUnix;
  } else if (absl::ConsumePrefix(&rest, "rediss://")) {
    out.kind = RedisUrl::Kind::kTcp;
    out.tls = true;
  } else if (absl::ConsumePrefix(&rest, "redis-sentinel://")) {
    absl::Status s = ParseSentinel(url, rest, &out);
    if (!s.ok()) return s;
  } else if (absl::ConsumePrefix(&rest, "redis-cluster://")) {
    out.kind = RedisUrl::Kind::kCluster;
  } else {
    return Bad(url, "unknown scheme");
  }

  if (out.kind == RedisUrl::Kind::kSentinel) {
    // parsed above
  } else if (out.kind == RedisUrl::Kind::kCluster) {
    // redis-cluster://[userinfo@]seed,seed,...[/]: no database.
    size_t slash = rest.find('/');
    absl::string_view authority = rest.substr(0, slash);
    if (slash != absl::string_view::npos && rest.size() > slash + 1 &&
        rest.substr(slash + 1) != "0") {
      return Bad(url, "a Redis Cluster has only database 0");
    }
    absl::Status s = ParseUserInfo(url, &authority, &out);
    if (!s.ok()) return s;
    for (absl::string_view seed : absl::StrSplit(authority, ',')) {
      RedisUrl::Endpoint e;
      s = ParseHostPort(url, seed, &e.host, &e.port);
      if (!s.ok()) return s;
      out.seeds.push_back(std::move(e));
    }
  } else if (out.kind == RedisUrl::Kind::kUnix) {
    // unix://[userinfo@]/path[?db=N]: userinfo ends at the '@' before the
    // first '/', if any.
    size_t slash = rest.find('/');
    size_t at = rest.substr(0, slash).rfind('@');
    if (at != absl::string_view::npos) {
      absl::string_view userinfo = rest.substr(0, at + 1);  // ends with '@'
      absl::Status s = ParseUserInfo(url, &userinfo, &out);
      if (!s.ok()) return s;
      rest = rest.substr(at + 1);
    }
    size_t q = rest.find('?');
    absl::string_view query;
    if (q != absl::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    if (rest.empty() || rest[0] != '/') {
      return Bad(url, "the socket path must be absolute (unix:///path)");
    }
    if (rest.size() == 1) return Bad(url, "missing socket path");
    out.path = std::string(rest);
    if (!query.empty()) {
      if (!absl::ConsumePrefix(&query, "db=")) {
        return Bad(url, "the only query parameter is db=N");
      }
      absl::Status s = ParseDb(url, query, &out.db);
      if (!s.ok()) return s;
    }
  } else {
    size_t slash = rest.find('/');
    absl::string_view authority = rest.substr(0, slash);
    absl::string_view path =
        slash == absl::string_view::npos ? "" : rest.substr(slash + 1);
    absl::Status s = ParseUserInfo(url, &authority, &out);
    if (!s.ok()) return s;
    s = ParseHostPort(url, authority, &out.host, &out.port);
    if (!s.ok()) return s;
    s = ParseDb(url, path, &out.db);
    if (!s.ok()) return s;
  }

  if (out.password.empty() && password_env != nullptr) {
    const char* env = std::getenv(password_env);
    if (env != nullptr) out.password = env;
  }
  if (out.kind == RedisUrl::Kind::kSentinel && out.sentinel_password.empty()) {
    const char* env = std::getenv(kSentinelPasswordEnv);
    if (env != nullptr) out.sentinel_password = env;
  }
  return out;
}

UvTransportOptions TransportOptionsForUrl(const RedisUrl& url,
                                          const TlsOptions& tls) {
  UvTransportOptions o;
  if (url.kind == RedisUrl::Kind::kSentinel) {
    o.sentinel = true;
    o.sentinels = url.sentinels;
    o.master_name = url.master_name;
    o.sentinel_username = url.sentinel_user;
    o.sentinel_password = url.sentinel_password;
  }
  if (url.kind == RedisUrl::Kind::kUnix) {
    o.connection.unix_socket = url.path;
  } else {
    o.connection.host = url.host;
    o.connection.port = url.port;
  }
  for (const RedisUrl::Endpoint& e : url.seeds) o.cluster_seeds.emplace_back(e.host, e.port);
  o.connection.username = url.user;
  o.connection.password = url.password;
  o.connection.db = url.db;
  o.tls = url.tls;
  if (url.tls) o.tls_options = tls;
  return o;
}

}  // namespace dlock
