#include "dlock/cli/flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(std::string, redis, "redis://127.0.0.1:6379",
          "Redis server URL: redis://[user:password@]host:port[/db], "
          "rediss://... (TLS, see --tls-*), "
          "unix:///path/to/sock[?db=N] or "
          "redis-sentinel://[user:password@]host:26379,host2:26379/mastername"
          "[?db=N&sentinel_password=P] (the master Sentinel names). Repeat for RedLock over several "
          "independent servers (quorum N/2+1). Default: $DLOCK_REDIS_URL if "
          "set, else redis://127.0.0.1:6379");
ABSL_FLAG(absl::Duration, ttl, absl::Seconds(30),
          "run: lease time-to-live; the watchdog renews it every ttl/3 while "
          "the command runs. Durations: 30s, 500ms, 2m, 1h30m");
ABSL_FLAG(absl::Duration, wait, absl::ZeroDuration(),
          "run: how long to wait for a busy lock (0: one attempt, exit 75 if "
          "busy)");
ABSL_FLAG(bool, fair, false,
          "run (one --redis only): wait in the resource's first-come-first-served "
          "queue (FairLock): with --wait, dlock runs get the lock in the order "
          "they asked, across machines, and a release wakes only the next one. "
          "Only fair runs of a resource queue; use --fair for all of them");
ABSL_FLAG(bool, shared, false,
          "run: take a SHARED (read) lock: any number of --shared runs of a "
          "resource run at once; a run without --shared is exclusive (the "
          "read-write lock's writer) and excludes them, and while it waits no "
          "new --shared run starts. Single server only");
ABSL_FLAG(int64_t, permits, 0,
          "run: take one of N permits of RESOURCE instead of the lock: at most "
          "N commands hold one at once across machines (a semaphore; one "
          "--redis only). Each permit is a lease of its own, renewed while "
          "the command runs and back after its ttl if dlock dies. Every "
          "client of RESOURCE should use the same N; 0: the lock (a mutex)");
ABSL_FLAG(std::string, on_lost, "term",
          "run: what to do to the command's process group when the lock is "
          "lost: term (SIGTERM, then SIGKILL after --kill-after), kill "
          "(SIGKILL), ignore (let it finish); dlock exits 79 once the group is "
          "gone. Also what happens if dlock itself is killed (then SIGKILL "
          "follows before the lease's deadline); ignore: nothing");
ABSL_FLAG(absl::Duration, kill_after, absl::Seconds(10),
          "run: SIGKILL the command's process group if it is still running "
          "this long after it was signalled (--on-lost=term, or a signal to "
          "dlock)");
ABSL_FLAG(absl::Duration, restart_window, absl::Seconds(60),
          "run, check, trust: the delayed-restart rule's window. A server whose "
          "data set began less than this long ago (it restarted without "
          "persistence, was flushed, or is new) refuses acquires, so no lock it "
          "lost can be granted twice. Used by RedLock (several --redis; 0 turns "
          "the rule off) and, when given, for a single server. EVERY client of "
          "the same servers must use the same window, at least the largest "
          "--ttl any of them uses; --ttl above it is refused");
ABSL_FLAG(int, min_replicas, 0,
          "run: a grant or renewal counts only once WAIT confirms this many "
          "replicas of the master have it (one --redis, e.g. a "
          "redis-sentinel:// URL); too few: the lock is released and dlock "
          "exits 69 (or the command is stopped as on a lost lease). 0: off");
ABSL_FLAG(absl::Duration, min_replicas_timeout, absl::Milliseconds(500),
          "run: how long the master waits for --min-replicas acknowledgements");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(2),
          "per-command Redis timeout; also how long dlock waits, before it "
          "exits, for releases still in flight");
ABSL_FLAG(std::string, prefix, "dlock:",
          "key prefix of the lock keys (as the library's KeyScheme)");
ABSL_FLAG(std::string, password_env, "DLOCK_REDIS_PASSWORD",
          "environment variable holding the password for URLs without one "
          "(keeps it out of ps and shell history)");
ABSL_FLAG(bool, verbose, false,
          "print lock events (acquire latency, waits, renewals, votes, "
          "loss) on stderr");
ABSL_FLAG(int, pings, 5, "check: round trips timed per server");
ABSL_FLAG(bool, force, false,
          "unlock: really remove the lock (without it, unlock only shows the "
          "holder and refuses)");
ABSL_FLAG(bool, strict, false,
          "check: treat warnings (e.g. no fsync-always persistence under "
          "RedLock) as unsafe");
ABSL_FLAG(std::string, tls_ca_cert, "",
          "rediss://: PEM file of the CA(s) that sign the servers' "
          "certificates (default: the system's trusted CAs)");
ABSL_FLAG(std::string, tls_ca_dir, "",
          "rediss://: directory of hashed CA certificates (c_rehash), "
          "instead of or besides --tls-ca-cert");
ABSL_FLAG(std::string, tls_cert, "",
          "rediss://: client certificate (PEM) for servers that require "
          "mutual TLS; needs --tls-key");
ABSL_FLAG(std::string, tls_key, "",
          "rediss://: private key (PEM) of --tls-cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "rediss://: the name the server certificate must carry, also sent "
          "as SNI (default: the URL's host)");
ABSL_FLAG(bool, tls_insecure_skip_verify, false,
          "rediss://: DANGEROUS, for throw-away test set-ups only: accept any "
          "server certificate (encrypted but not authenticated); dlock check "
          "warns");
ABSL_FLAG(std::string, store, "",
          "fence-check/fenced-set/fenced-incr: URL of the Redis store the "
          "fenced write goes to (default: the first --redis)");
ABSL_FLAG(int64_t, fence, 0,
          "fence-check/fenced-set/fenced-incr: the holder's fence (default: "
          "$DLOCK_FENCE, which dlock run exports)");
ABSL_FLAG(int64_t, floor, 0,
          "fenced-incr: refuse (exit 81, nothing written) a result below this "
          "value (default: no floor)");
