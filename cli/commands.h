// The `dlock` subcommands. Each returns the process exit code (exit_codes.h)
// and prints its results on stdout, its diagnostics on stderr.
#ifndef DLOCK_CLI_COMMANDS_H_
#define DLOCK_CLI_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {
namespace cli {

struct CommonOptions {
  std::vector<RedisUrl> urls;
  // For the rediss:// URLs among `urls` (--tls-* flags).
  TlsOptions tls;
  absl::Duration timeout = absl::Seconds(2);
  std::string prefix = "dlock:";
  bool verbose = false;
};

// `dlock status RESOURCE`.
int StatusCommand(const CommonOptions& common, const std::string& resource);

// `dlock check`.
// `restart_window`: the restart rule's window (zero: the rule is off, as
// for one server without --restart-window); a young data set is a warning.
int CheckCommand(const CommonOptions& common, absl::Duration ttl, int pings,
                 bool strict, absl::Duration restart_window);

// `dlock unlock [--force] RESOURCE`.
int UnlockCommand(const CommonOptions& common, const std::string& resource, bool force);

// `dlock trust [--force]`: shows (and with --force declares trusted) each
// server's data-set marker, the restart rule's record of when its data began.
int TrustCommand(const CommonOptions& common, absl::Duration restart_window, bool force);

// The `dlock trust --force --redis URL ...` line for `urls` (no passwords:
// those come from the environment as for any dlock command).
std::string TrustCommandLine(const std::vector<RedisUrl>& urls);

// What `run` and `check` say about servers whose data sets are young: how
// long is left (`left`, zero when unknown) and `dlock trust --force` for
// `urls`, with when it is safe. One paragraph, no trailing newline.
std::string YoungDataSetAdvice(absl::Duration left, const std::vector<RedisUrl>& urls);

enum class OnLost { kTerm, kKill, kIgnore };

struct RunOptions {
  // The lock's name in messages and $DLOCK_RESOURCE: the resource, or for
  // several resources their sorted list joined by ',' (shortened if long).
  std::string resource;
  // Every resource (sorted, no duplicates). More than one: a multi-lock,
  // all or nothing (ResourceSetLock).
  std::vector<std::string> resources;
  // --shared: read locks (ReadWriteLock::reader()); else the writer.
  bool shared = false;
  std::vector<std::string> command;
  absl::Duration ttl = absl::Seconds(30);
  absl::Duration wait = absl::ZeroDuration();
  // --fair: a FairLock (one server only), FIFO across processes.
  bool fair = false;
  // --permits: > 0 takes one of that many permits of `resource` (a
  // Semaphore, one server only) instead of the lock.
  int64_t permits = 0;
  OnLost on_lost = OnLost::kTerm;
  absl::Duration kill_after = absl::Seconds(10);
  // The delayed-restart rule's window (--restart-window): a server whose data
  // set began less than this long ago refuses acquires. RedLock: always (0
  // turns the rule off). One server: only when `restart_window_set`.
  absl::Duration restart_window = absl::Seconds(60);
  bool restart_window_set = false;
  // --min-replicas / --min-replicas-timeout (one server only).
  int min_replicas = 0;
  absl::Duration min_replicas_timeout = absl::Milliseconds(500);
};

// `dlock run RESOURCE -- CMD...`.
int RunCommand(const CommonOptions& common, const RunOptions& run);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_COMMANDS_H_
