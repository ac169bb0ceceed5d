#include "dlock/cli/command_line.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {
namespace cli {
namespace {

// Flags that are ours: defined in a file under cli/.
bool IsDlockFlag(const absl::CommandLineFlag& flag) {
  return absl::StrContains(flag.Filename(), "cli/");
}

absl::Status Usage(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

std::string ValueHint(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<absl::Duration>()) {
    return " (expected a duration such as 30s, 500ms, 2m, 1h30m)";
  }
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>()) return " (expected an integer)";
  if (flag.IsOfType<bool>()) return " (expected true or false)";
  return "";
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(
    const std::vector<std::string>& args) {
  CommandLine out;
  if (!args.empty()) out.program = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.has_separator = true;
      out.command.assign(args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help" || arg == "-help" || arg == "--helpfull") {
      out.help = true;
      continue;
    }
    // A negative number (fenced-incr's DELTA) is an argument, not a flag.
    if (arg.size() < 2 || arg[0] != '-' || arg == "-" ||
        arg.find_first_not_of("0123456789", 1) == std::string::npos) {
      out.positional.push_back(arg);
      continue;
    }
    absl::string_view body = arg;
    body.remove_prefix(body[1] == '-' ? 2 : 1);
    absl::string_view name = body, value;
    bool has_value = false;
    size_t eq = body.find('=');
    if (eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    std::string canonical = absl::StrReplaceAll(name, {{"-", "_"}});
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(canonical);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(canonical, "no")) {
      absl::CommandLineFlag* positive =
          absl::FindCommandLineFlag(canonical.substr(2));
      if (positive != nullptr && positive->IsOfType<bool>()) {
        flag = positive;
        negated = true;
      }
    }
    if (flag == nullptr || !IsDlockFlag(*flag)) {
      return Usage(absl::StrCat("unknown flag ", arg));
    }
    if (negated) {
      if (has_value) return Usage(absl::StrCat(arg, " takes no value"));
      std::string error;
      flag->ParseFrom("false", &error);
      continue;
    }
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size() && args[i + 1] != "--") {
        value = args[++i];
      } else {
        return Usage(absl::StrCat("flag --", flag->Name(), " needs a value"));
      }
    }
    if (flag->Name() == "redis") {
      if (value.empty()) return Usage("--redis needs a URL");
      out.redis_urls.emplace_back(value);
      continue;
    }
    out.given.insert(std::string(flag->Name()));
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return Usage(absl::StrCat("bad value \"", value, "\" for --",
                                flag->Name(), ValueHint(*flag)));
    }
  }
  return out;
}

std::string UsageText(const std::string& program) {
  std::string text = absl::StrCat(
      "usage:\n"
      "  ", program, " run [--redis URL]... [--ttl 30s] [--wait 0s]\n"
      "      [--fair | --shared | --permits N] [--on-lost term|kill|ignore]\n"
      "      RESOURCE [RESOURCE...] -- CMD [ARGS...]\n"
      "      Takes the lock RESOURCE (RedLock when several --redis are given),\n"
      "      exclusive (it also excludes --shared runs), or shared with\n"
      "      --shared (--shared runs of a resource overlap; one server only);\n"
      "      several RESOURCEs: all of them or none (sorted order),\n"
      "      runs CMD in a process group of its own while the watchdog renews\n"
      "      the lease, and releases the lock once every process of that group\n"
      "      has exited (background jobs included); exits with CMD's status\n"
      "      once every server's release has been answered -- RedLock reports\n"
      "      a release at quorum, the rest still finish -- waiting at most\n"
      "      --timeout for a server that does not answer (its key then\n"
      "      expires with the TTL).\n"
      "      Lease lost: the whole process group gets the --on-lost signal\n"
      "      (then SIGKILL after --kill-after); dlock exits 79 once the group\n"
      "      is gone. SIGINT/SIGTERM/SIGHUP/SIGQUIT to dlock: forwarded to the\n"
      "      group, SIGKILL after --kill-after. dlock itself killed (SIGKILL):\n"
      "      a watcher process signals the group with the --on-lost signal and\n"
      "      SIGKILLs it before the lease's deadline. A process that leaves the\n"
      "      group (setsid, setpgid) is not covered. In the foreground of a\n"
      "      terminal, CMD's group gets the terminal (it can read it; ^C and\n"
      "      ^Z reach it; ^Z stops dlock too). With --permits N: one of N\n"
      "      permits instead of the lock, so at most N such commands run at\n"
      "      once across machines (one --redis).\n"
      "  ", program, " status [--redis URL]... RESOURCE\n"
      "      Held or free, remaining TTL and fencing counter, per server;\n"
      "      --shared holders (readers) and a waiting exclusive run, if any;\n"
      "      the --fair queue (waiters in order, each entry's expiry).\n"
      "  ", program, " check [--redis URL]...\n"
      "      Pre-flight of the deployment: eviction policy, persistence,\n"
      "      version, scripting, PUBLISH/SUBSCRIBE permission, latency, the\n"
      "      same instance listed twice. Exit 78 if unsafe.\n"
      "  ", program, " unlock [--force] [--redis URL]... RESOURCE\n"
      "      Admin way out for a lock left by a dead holder: shows holder\n"
      "      (token prefix), fence and TTL, a semaphore's permits, readers,\n"
      "      a waiting writer and the fair queue; with --force removes all of\n"
      "      them on every server, bumps the fence (the old holder's writes\n"
      "      are then fenced off), wakes waiters and says what it removed.\n"
      "      Without --force: exit 64 if anything holds the resource.\n"
      "  ", program, " trust [--force] [--redis URL]...\n"
      "      Shows when each server's data set began (the restart rule's\n"
      "      marker: a server younger than --restart-window refuses acquires).\n"
      "      With --force declares it trusted, for servers that never served\n"
      "      locks or whose data survived; UNSAFE right after a restart that\n"
      "      lost data. Without --force on an untrusted server: exit 64.\n"
      "  ", program, " fence-check [--store URL] [--fence N] RESOURCE\n"
      "  ", program, " fenced-set [--store URL] [--fence N] RESOURCE KEY VALUE\n"
      "  ", program, " fenced-incr [--store URL] [--fence N] [--floor F] RESOURCE KEY DELTA\n"
      "      Fenced writes to a Redis store (--store, default the first\n"
      "      --redis) with the fence from --fence or $DLOCK_FENCE (dlock run\n"
      "      exports it): applied and the fence recorded only if it is >= the\n"
      "      highest recorded for RESOURCE; else exit 80 (stale: a newer\n"
      "      holder wrote). fence-check only records it; fenced-incr prints\n"
      "      the new value, exit 81 if it would go below --floor. KEY must\n"
      "      carry {RESOURCE} (one Cluster slot), e.g. stock:{sku-42}.\n"
      "\n"
      "URLs: redis://[user:password@]host:port[/db], unix:///path/to/sock[?db=N],\n"
      "rediss://[user:password@]host:port[/db] (TLS: the server certificate is\n"
      "checked against --tls-ca-cert or the system CAs and must name the host);\n"
      "a URL without password takes it from $DLOCK_REDIS_PASSWORD (see\n"
      "--password-env).\n"
      "redis-sentinel://[user:password@]host:26379[,host:port...]/mastername\n"
      "[?db=N&sentinel_user=U&sentinel_password=P]: the master the sentinels\n"
      "name (ROLE-checked, followed across failovers; the sentinels' password\n"
      "may also come from $DLOCK_SENTINEL_PASSWORD). Without --redis: $DLOCK_REDIS_URL, else\n"
      "redis://127.0.0.1:6379.\n"
      "\n"
      "exit codes:\n"
      "  run: the command's status (128+N if killed by signal N)\n"
      "  64 bad usage   69 Redis unavailable   70 internal error\n"
      "  75 lock busy   77 permission denied   78 check: unsafe setting\n"
      "  79 lock lost   80 stale fence   81 below the floor\n"
      "  126 command not executable   127 command not found\n"
      "\n"
      "flags ('-' and '_' are interchangeable in names):\n");
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& entry : absl::GetAllFlags()) {
    if (IsDlockFlag(*entry.second)) flags.push_back(entry.second);
  }
  std::sort(flags.begin(), flags.end(),
            [](absl::CommandLineFlag* a, absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  for (absl::CommandLineFlag* flag : flags) {
    absl::StrAppend(&text, "  --", absl::StrReplaceAll(flag->Name(), {{"_", "-"}}),
                    " (default: ", flag->DefaultValue(), ")\n      ",
                    flag->Help(), "\n");
  }
  return text;
}

}  // namespace cli
}  // namespace dlock
