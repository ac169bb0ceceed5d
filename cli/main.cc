// dlock: run a command under a Redis lock, inspect a lock, check a
// deployment. See `dlock --help` and exit_codes.h.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dlock/cli/command_line.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/fenced_commands.h"
#include "dlock/cli/flags.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/semaphore.h"

namespace dlock {
namespace cli {
namespace {

// dlock's version: the one place it is written (CMake reads it from here).
constexpr char kDlockVersion[] = "0.1.0";

// Makes descriptors 0, 1 and 2 valid: a closed one is opened on /dev/null.
// Run first thing, before anything opens a descriptor: otherwise the next
// socket, pipe or libuv handle would get number 0, 1 or 2, and libuv
// aborts (`uv__close: fd > STDERR_FILENO`), output would go into a socket,
// and a command would inherit a Redis connection as its stdin.
void EnsureStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number is `fd` (those below are valid by now).
    int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened < 0) _exit(kExitInternal);  // nothing to report it on
    if (opened != fd) {
      dup2(opened, fd);
      close(opened);
    }
  }
}

int UsageError(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "dlock: %s\nTry '%s --help'.\n", message.c_str(),
               program.c_str());
  return kExitUsage;
}

absl::Status CheckDuration(const char* flag, absl::Duration d, bool allow_zero) {
  if (d == absl::InfiniteDuration() || d < absl::ZeroDuration() ||
      (!allow_zero && d == absl::ZeroDuration())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad value ", absl::FormatDuration(d), " for --", flag, ": must be ",
        allow_zero ? "finite and >= 0" : "finite and > 0"));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  const std::string program = "dlock";
  if (args.size() == 2 && args[1] == "--version") {
    std::printf("dlock %s\n", kDlockVersion);
    return kExitOk;
  }
  absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
  if (!cl.ok()) return UsageError(program, std::string(cl.status().message()));
  if (cl->help) {
    std::fputs(UsageText(program).c_str(), stdout);
    return kExitOk;
  }
  if (cl->positional.empty()) {
    return UsageError(program,
                      "missing subcommand (run, status, check, unlock, trust, fence-check, "
                      "fenced-set or fenced-incr)");
  }
  const std::string sub = cl->positional[0];

  CommonOptions common;
  std::vector<std::string> url_texts = cl->redis_urls;
  if (url_texts.empty()) {
    const char* env = std::getenv("DLOCK_REDIS_URL");
    url_texts.push_back(env != nullptr && *env != '\0' ? env
                                                       : absl::GetFlag(FLAGS_redis));
  }
  const std::string password_env = absl::GetFlag(FLAGS_password_env);
  for (const std::string& text : url_texts) {
    absl::StatusOr<RedisUrl> url = ParseRedisUrl(text, password_env.c_str());
    if (!url.ok()) return UsageError(program, std::string(url.status().message()));
    if (!url->user.empty() && url->password.empty()) {
      // An ACL user needs its password: say so now, as a usage error,
      // instead of failing the connection's AUTH later.
      return UsageError(program, absl::StrCat(url->Display(), ": user \"", url->user,
                                              "\" needs a password (in the URL or $",
                                              password_env, ")"));
    }
    common.urls.push_back(*url);
  }
  common.tls.ca_file = absl::GetFlag(FLAGS_tls_ca_cert);
  common.tls.ca_dir = absl::GetFlag(FLAGS_tls_ca_dir);
  common.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  common.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  common.tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  common.tls.insecure_skip_verify = absl::GetFlag(FLAGS_tls_insecure_skip_verify);
  if (common.tls.cert_file.empty() != common.tls.key_file.empty()) {
    return UsageError(program, "--tls-cert and --tls-key go together");
  }
  common.timeout = absl::GetFlag(FLAGS_timeout);
  common.prefix = absl::GetFlag(FLAGS_prefix);
  common.verbose = absl::GetFlag(FLAGS_verbose);
  const absl::Duration ttl = absl::GetFlag(FLAGS_ttl);
  for (absl::Status s :
       {CheckDuration("timeout", common.timeout, false), CheckDuration("ttl", ttl, false),
        CheckDuration("wait", absl::GetFlag(FLAGS_wait), true),
        CheckDuration("kill_after", absl::GetFlag(FLAGS_kill_after), true),
        CheckDuration("restart_window", absl::GetFlag(FLAGS_restart_window), true)}) {
    if (!s.ok()) return UsageError(program, std::string(s.message()));
  }
  if (absl::Status s = ValidateTtl(ttl); !s.ok()) {
    return UsageError(program, absl::StrCat("--ttl: ", s.message()));
  }

  if (sub == "run") {
    if (cl->positional.size() < 2) {
      return UsageError(program, "run needs a RESOURCE (or several) before '--'");
    }
    if (!cl->has_separator || cl->command.empty()) {
      return UsageError(program, "run needs a command after '--'");
    }
    RunOptions run;
    absl::StatusOr<std::vector<std::string>> resources = OrderResources(
        std::vector<std::string>(cl->positional.begin() + 1, cl->positional.end()));
    if (!resources.ok()) return UsageError(program, std::string(resources.status().message()));
    run.resources = *resources;
    run.resource = absl::StrJoin(run.resources, ",");
    if (run.resource.size() > kMaxResourceLength) {
      run.resource = absl::StrCat(run.resources[0], ",...(", run.resources.size(), " resources)")
                         .substr(0, kMaxResourceLength);
    }
    run.shared = absl::GetFlag(FLAGS_shared);
    if (run.shared && common.urls.size() > 1) {
      return UsageError(program, "--shared needs a single --redis server (RedLock has no "
                                 "read-write lock)");
    }
    run.command = cl->command;
    run.ttl = ttl;
    run.wait = absl::GetFlag(FLAGS_wait);
    run.fair = absl::GetFlag(FLAGS_fair);
    if (run.fair && common.urls.size() > 1) {
      return UsageError(program, "--fair needs a single --redis (RedLock has no queue)");
    }
    if (run.fair && run.shared) {
      return UsageError(program, "--fair and --shared cannot be combined (the fair queue "
                                 "serves exclusive runs only)");
    }
    if (run.fair && run.resources.size() > 1) {
      return UsageError(program, "--fair takes one RESOURCE (a fair queue is per resource)");
    }
    run.permits = absl::GetFlag(FLAGS_permits);
    if (cl->given.count("permits") > 0 &&
        (run.permits < 1 || run.permits > kMaxPermits || common.urls.size() != 1)) {
      return UsageError(program, run.permits < 1 || run.permits > kMaxPermits
                                     ? absl::StrCat("bad value ", run.permits,
                                                    " for --permits: must be in [1, ",
                                                    kMaxPermits, "]")
                                     : "--permits needs exactly one --redis (a semaphore "
                                       "lives on a single server)");
    }
    if (run.permits > 0 && (run.fair || run.shared || run.resources.size() > 1)) {
      return UsageError(program, "--permits takes one RESOURCE and cannot be combined with "
                                 "--fair or --shared");
    }
    run.kill_after = absl::GetFlag(FLAGS_kill_after);
    run.restart_window = absl::GetFlag(FLAGS_restart_window);
    run.restart_window_set = cl->given.count("restart_window") > 0;
    run.min_replicas = absl::GetFlag(FLAGS_min_replicas);
    run.min_replicas_timeout = absl::GetFlag(FLAGS_min_replicas_timeout);
    if (run.min_replicas < 0) return UsageError(program, "--min-replicas must be >= 0");
    if (run.min_replicas > 0 && common.urls.size() > 1) {
      return UsageError(program,
                        "--min-replicas needs one --redis (RedLock's servers are "
                        "independent, not replicas)");
    }
    if (run.min_replicas > 0 && (run.fair || run.permits > 0)) {
      return UsageError(program,
                        "--min-replicas cannot be combined with --fair or --permits (the "
                        "fair queue and the semaphore do not wait for replicas)");
    }
    if (absl::Status s = CheckDuration("min_replicas_timeout", run.min_replicas_timeout,
                                       false);
        !s.ok()) {
      return UsageError(program, std::string(s.message()));
    }
    const bool rule_on = common.urls.size() > 1 ? run.restart_window > absl::ZeroDuration()
                                                : run.restart_window_set &&
                                                      run.restart_window > absl::ZeroDuration();
    if (rule_on && run.ttl > run.restart_window) {
      return UsageError(program,
                        absl::StrCat("--ttl ", absl::FormatDuration(run.ttl),
                                     " exceeds --restart-window ",
                                     absl::FormatDuration(run.restart_window),
                                     ": a lease must not outlive the window (raise "
                                     "--restart-window on every client of these servers)"));
    }
    const std::string on_lost = absl::GetFlag(FLAGS_on_lost);
    if (on_lost == "term") {
      run.on_lost = OnLost::kTerm;
    } else if (on_lost == "kill") {
      run.on_lost = OnLost::kKill;
    } else if (on_lost == "ignore") {
      run.on_lost = OnLost::kIgnore;
    } else {
      return UsageError(program, absl::StrCat("bad value \"", on_lost,
                                              "\" for --on-lost: expected term, kill or ignore"));
    }
    if (absl::Status s = ValidateResource(run.resource); !s.ok()) {
      return UsageError(program, std::string(s.message()));
    }
    return RunCommand(common, run);
  }
  if (cl->has_separator) {
    return UsageError(program, absl::StrCat("'--' is only for run, not ", sub));
  }
  if (sub == "status") {
    if (cl->positional.size() != 2) {
      return UsageError(program, "status needs exactly one RESOURCE");
    }
    return StatusCommand(common, cl->positional[1]);
  }
  if (sub == "check") {
    if (cl->positional.size() != 1) {
      return UsageError(program, "check takes no arguments besides flags");
    }
    int pings = absl::GetFlag(FLAGS_pings);
    if (pings < 1 || pings > 10000) {
      return UsageError(program, "--pings must be in 1..10000");
    }
    // The restart rule: RedLock's always, one server's with --restart-window.
    const bool rule_on = common.urls.size() > 1 || cl->given.count("restart_window") > 0;
    return CheckCommand(common, ttl, pings, absl::GetFlag(FLAGS_strict),
                        rule_on ? absl::GetFlag(FLAGS_restart_window) : absl::ZeroDuration());
  }
  if (sub == "trust") {
    if (cl->positional.size() != 1) {
      return UsageError(program, "trust takes no arguments besides flags");
    }
    return TrustCommand(common, absl::GetFlag(FLAGS_restart_window),
                        absl::GetFlag(FLAGS_force));
  }
  if (IsFencedCommand(sub)) {
    const int64_t floor = absl::GetFlag(FLAGS_floor);
    return FencedCommand(
        common, sub, std::vector<std::string>(cl->positional.begin() + 1, cl->positional.end()),
        absl::GetFlag(FLAGS_store), absl::GetFlag(FLAGS_fence),
        cl->given.count("floor") > 0 ? &floor : nullptr);
  }
  if (sub == "unlock") {
    if (cl->positional.size() != 2) {
      return UsageError(program, "unlock needs exactly one RESOURCE");
    }
    return UnlockCommand(common, cl->positional[1], absl::GetFlag(FLAGS_force));
  }
  return UsageError(program, absl::StrCat("unknown subcommand \"", sub,
                                          "\" (expected run, status, check, unlock, trust, "
                                          "fence-check, fenced-set or fenced-incr)"));
}

}  // namespace
}  // namespace cli
}  // namespace dlock

int main(int argc, char** argv) {
  dlock::cli::EnsureStandardDescriptors();
  signal(SIGPIPE, SIG_IGN);
  return dlock::cli::Main(argc, argv);
}
