// This header defines `RedisUrl` and `ParseRedisUrl`, how dlock (the
// command line, BlockingClient, the examples) names a Redis server, and
// `TransportOptionsForUrl`, the transport options a URL stands for:
//
//   redis://[[user]:password@]host[:port][/db]     TCP (port 6379 by default)
//   rediss://[[user]:password@]host[:port][/db]    TLS (see tls_transport.h;
//                                                  the CA, client certificate
//                                                  and server name come from
//                                                  TlsOptions, not the URL)
//   redis://[user@]host:port                       password from the environment
//   unix://[[user]:password@]/path/to/redis.sock[?db=N]
//   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/mastername
//       [?db=N&sentinel_user=U&sentinel_password=P]
//                                                  Sentinel (port 26379 by
//                                                  default): the master named
//                                                  `mastername` as the
//                                                  sentinels report it (see
//                                                  sentinel_transport.h)
//
// In a redis-sentinel:// URL the user and password before '@' are the data
// nodes' (master and replicas), as in every other form; the sentinels often
// have none or their own (`requirepass` in sentinel.conf), so theirs are the
// query parameters sentinel_user / sentinel_password (percent-decoded), and
// the sentinel password comes from the environment variable
// DLOCK_SENTINEL_PASSWORD when the URL has none. Sentinel URLs are plain TCP
// (no TLS form yet).
//
//   redis-cluster://[[user]:password@]host1[:port],host2[:port],...
//                                                  Redis Cluster: the nodes
//                                                  asked for the slot map
//                                                  (seeds; any subset of the
//                                                  cluster); no db (a cluster
//                                                  has only database 0), no
//                                                  TLS (see cluster_transport.h)
//
// `host` may be a name, an IPv4 address or a bracketed IPv6 address
// ("redis://[::1]:6379"). User and password are percent-decoded
// ("p%40ss" is "p@ss"). A password on the command line is visible to other
// users of the machine (ps, /proc): prefer the environment variable, which
// ParseRedisUrl reads when the URL carries no password.
//
// Thread-compatible value types; the functions are thread-safe.
#ifndef DLOCK_TRANSPORT_UV_REDIS_URL_H_
#define DLOCK_TRANSPORT_UV_REDIS_URL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {

// The environment variable a URL without password takes it from.
inline constexpr char kPasswordEnv[] = "DLOCK_REDIS_PASSWORD";
// The environment variable a redis-sentinel:// URL without
// sentinel_password takes the sentinels' password from.
inline constexpr char kSentinelPasswordEnv[] = "DLOCK_SENTINEL_PASSWORD";

struct RedisUrl {
  enum class Kind { kTcp, kUnix, kSentinel, kCluster };
  // A host and port of a list (sentinels, cluster seeds).
  struct Endpoint {
    std::string host;  // without brackets for IPv6
    int port = 6379;   // 26379 for sentinels when the URL gives none
  };
  Kind kind = Kind::kTcp;
  bool tls = false;   // kTcp only: rediss://
  std::string host;   // kTcp: without brackets for IPv6
  int port = 6379;    // kTcp
  std::string path;   // kUnix: the socket path
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;
  // kSentinel: the sentinels (at least one), the master's name, and the
  // sentinels' own credentials (empty: none).
  std::vector<Endpoint> sentinels;
  std::string master_name;
  std::string sentinel_user;
  std::string sentinel_password;
  // kCluster: the seed nodes, in URL order.
  std::vector<Endpoint> seeds;

  // "host:port", "tls:host:port", "unix:/path",
  // "sentinel:h1:26379,h2:26379/name" or "cluster:host1:port1,host2:port2"
  // (never the user or password): for
  // messages.
  std::string Display() const;
};

// Parses `url`. A URL without a password takes it from the environment
// variable `password_env` when that is set and non-empty. Errors
// (kInvalidArgument) name what is wrong: unknown scheme, missing host, port
// not in 1..65535, db not a number in 0..(2^31-1), bad percent-escape,
// relative unix path.
absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url,
                                       const char* password_env = kPasswordEnv);

// What a URL connects to: `connection` (host and port or unix socket, AUTH,
// SELECT; the timeouts and backoff keep their defaults) and, when `tls`,
// the TLS settings for a TlsTransport. Pass it to UvTransport::Create.
struct UvTransportOptions {
  HiredisTransportOptions connection;
  // Non-empty: a Redis Cluster reached through these seeds ("host", port);
  // `connection` then gives every node connection's credentials and
  // timeouts (its host, port and db are not used).
  std::vector<std::pair<std::string, int>> cluster_seeds;
  bool tls = false;
  TlsOptions tls_options;
  // redis-sentinel://: `connection` then holds the data nodes' credentials,
  // db and timeouts (its host and port are discovered).
  bool sentinel = false;
  std::vector<RedisUrl::Endpoint> sentinels;
  std::string master_name;
  std::string sentinel_username;
  std::string sentinel_password;
};

// The options for `url`. `tls` (CA, client certificate, server name, ...)
// is used only when the URL is rediss:// (so one set of --tls-* flags can
// serve a RedLock over plain and TLS servers); it is ignored otherwise.
UvTransportOptions TransportOptionsForUrl(const RedisUrl& url,
                                          const TlsOptions& tls = TlsOptions());

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_REDIS_URL_H_
