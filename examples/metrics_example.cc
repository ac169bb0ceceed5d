// Metrics example: a service that exports dlock's metrics to Prometheus.
//
// It starts three private redis-servers (or uses --redis), installs one
// PrometheusLockObserver in every component (SimpleLock, RetryLock,
// Watchdog, RedLock), serves the registry on /metrics with
// prometheus::Exposer, and runs a few lock rounds:
//   - --rounds times: A takes "job:<i>", B's single try finds it busy, B
//     waits for it through a RetryLock, A extends and releases, B gets it
//     and releases;
//   - --rounds RedLock acquire/release rounds over the three servers;
//   - A holds "leader" under a Watchdog, renewed while the example runs.
// Then it checks the metric values the rounds must have produced (exit 1 if
// not), prints the dlock series, writes the port to --port_file and keeps
// serving until --serve_for has passed or it gets SIGTERM/SIGINT.
//
//   bazel run //examples:metrics_example -- --serve_for=1h --listen=127.0.0.1:9464
//   curl -s http://127.0.0.1:9464/metrics | grep ^dlock_
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/metrics/prometheus_observer.h"
#include "dlock/redlock/redlock.h"
#include "dlock/watchdog/watchdog.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

ABSL_FLAG(std::vector<std::string>, redis, {},
          "three Redis servers (redis://host:port,...); default: start private ones");
ABSL_FLAG(int, rounds, 3, "lock rounds of each kind");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "address of the /metrics endpoint (port 0: any free port)");
ABSL_FLAG(std::string, port_file, "",
          "when set, the bound /metrics port is written there once the rounds are done");
ABSL_FLAG(absl::Duration, serve_for, absl::ZeroDuration(),
          "keep serving /metrics (and renewing the leader lease) this long after the "
          "rounds; SIGTERM/SIGINT end it earlier");

namespace dlock {
namespace examples {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

// Runs `env`'s loop until `*out` has a value.
template <typename T>
bool Await(ExampleEnv& env, const std::optional<T>& out) {
  return env.RunUntil([&] { return out.has_value(); }, absl::Seconds(30));
}

absl::StatusOr<Lease> AcquireNow(ExampleEnv& env, Lock& lock, const std::string& resource,
                                 absl::Duration ttl) {
  std::optional<absl::StatusOr<Lease>> out;
  AcquireOptions o;
  o.ttl = ttl;
  absl::StatusOr<AcquireHandle> h =
      lock.Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
  if (!h.ok()) return h.status();
  if (!Await(env, out)) return absl::DeadlineExceededError("acquire never answered");
  return *std::move(out);
}

absl::Status ReleaseNow(ExampleEnv& env, Lock& lock, const Lease& lease) {
  std::optional<absl::Status> out;
  absl::Status s = lock.Release(lease, [&](absl::Status r) { out = r; });
  if (!s.ok()) return s;
  if (!Await(env, out)) return absl::DeadlineExceededError("release never answered");
  return *out;
}

absl::StatusOr<Lease> ExtendNow(ExampleEnv& env, Lock& lock, const Lease& lease,
                                absl::Duration ttl) {
  std::optional<absl::StatusOr<Lease>> out;
  absl::Status s = lock.Extend(lease, ttl, [&](absl::StatusOr<Lease> r) { out = r; });
  if (!s.ok()) return s;
  if (!Await(env, out)) return absl::DeadlineExceededError("extend never answered");
  return *std::move(out);
}

// The value of the series `name` whose labels are exactly `labels` in the
// text exposition format `text`, or -1 when absent. (Enough of a parser for
// the label values this example produces: no commas, quotes or braces.)
double Value(const std::string& text, const std::string& name,
             std::map<std::string, std::string> labels) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t open = line.find('{');
    const size_t close = line.find('}');
    std::map<std::string, std::string> have;
    absl::string_view metric = line.substr(0, line.find(' '));
    absl::string_view rest = line.substr(metric.size());
    if (open != absl::string_view::npos && close != absl::string_view::npos) {
      metric = line.substr(0, open);
      rest = line.substr(close + 1);
      for (absl::string_view kv :
           absl::StrSplit(line.substr(open + 1, close - open - 1), ',', absl::SkipEmpty())) {
        std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
        if (p.second.size() >= 2) p.second = p.second.substr(1, p.second.size() - 2);
        have.insert(std::move(p));
      }
    }
    if (metric != name || have != labels) continue;
    double v = -1;
    std::istringstream(std::string(rest)) >> v;
    return v;
  }
  return -1;
}

absl::Status Run(ExampleEnv& env, const std::shared_ptr<prometheus::Registry>& registry,
                 PrometheusLockObserver* observer, int port) {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  std::unique_ptr<Transport> conn_a = env.Connect(0);
  std::unique_ptr<Transport> conn_b = env.Connect(0);
  std::vector<std::unique_ptr<Transport>> redlock_conns;
  for (size_t i = 0; i < env.servers(); ++i) redlock_conns.push_back(env.Connect(i));
  if (conn_a == nullptr || conn_b == nullptr) return absl::UnavailableError("no connection");
  for (const auto& c : redlock_conns) {
    if (c == nullptr) return absl::UnavailableError("no connection");
  }

  SimpleLockOptions so;
  so.observer = observer;
  SimpleLock a(env.loop(), conn_a.get(), so);
  SimpleLock b(env.loop(), conn_b.get(), so);
  RetryLockOptions ro;
  ro.observer = observer;
  RetryLock b_waiting(env.loop(), &b, ro);
  WatchdogOptions wo;
  wo.observer = observer;
  Watchdog watchdog(env.loop(), &a, wo);
  RedLockOptions rlo;
  rlo.observer = observer;
  // Generous per-server deadline (default: min(ttl/10, 50 ms)), so a loaded
  // test machine does not turn votes into timeouts and change the counts.
  rlo.server_timeout = absl::Seconds(1);
  std::vector<Transport*> servers;
  for (size_t i = 0; i < env.servers(); ++i) {
    servers.push_back(redlock_conns[i].get());
    rlo.server_names.push_back(env.address(i));
  }
  absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(env.loop(), servers, rlo);
  if (!redlock.ok()) return redlock.status();

  const std::string run = absl::StrCat(absl::ToUnixNanos(absl::Now()));
  for (int i = 1; i <= rounds; ++i) {
    const std::string job = absl::StrCat("job:", run, ":", i);
    absl::StatusOr<Lease> held = AcquireNow(env, a, job, absl::Seconds(10));
    if (!held.ok()) return held.status();
    absl::StatusOr<Lease> busy = AcquireNow(env, b, job, absl::Seconds(10));
    if (!absl::IsAborted(busy.status())) {
      return absl::InternalError(
          absl::StrCat("B's try should be busy: ", busy.status().ToString()));
    }
    std::optional<absl::StatusOr<Lease>> waited;
    AcquireOptions wait;
    wait.ttl = absl::Seconds(10);
    wait.wait = absl::Seconds(10);
    absl::StatusOr<AcquireHandle> h =
        b_waiting.Acquire(job, wait, [&](absl::StatusOr<Lease> r) { waited = std::move(r); });
    if (!h.ok()) return h.status();
    absl::StatusOr<Lease> extended = ExtendNow(env, a, *held, absl::Seconds(20));
    if (!extended.ok()) return extended.status();
    if (absl::Status s = ReleaseNow(env, a, *extended); !s.ok()) return s;
    if (!Await(env, waited)) return absl::DeadlineExceededError("B's wait never ended");
    if (!waited->ok()) return waited->status();
    if (absl::Status s = ReleaseNow(env, b_waiting, **waited); !s.ok()) return s;
    Say(absl::StrCat("round ", i, ": A held ", job, ", B was busy, waited, got it (fence ",
                     (*waited)->fence, ") and released"));
  }
  for (int i = 1; i <= rounds; ++i) {
    absl::StatusOr<Lease> lease =
        AcquireNow(env, **redlock, absl::StrCat("report:", run, ":", i), absl::Seconds(10));
    if (!lease.ok()) return lease.status();
    if (absl::Status s = ReleaseNow(env, **redlock, *lease); !s.ok()) return s;
  }
  Say(absl::StrCat(rounds, " RedLock rounds over ", env.servers(), " servers done"));

  absl::StatusOr<Lease> leader = AcquireNow(env, a, "leader:" + run, absl::Seconds(3));
  if (!leader.ok()) return leader.status();
  std::optional<absl::Status> lost;
  WatchOptions watch_options;
  watch_options.on_lost = [&](absl::Status why) { lost = why; };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*leader, std::move(watch_options));
  if (!watch.ok()) return watch.status();
  // One renewal (every ttl/3 = 1 s).
  env.RunUntil([] { return false; }, absl::Milliseconds(1500));

  // What the rounds must have recorded.
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, registry->Collect());
  const std::string t = text.str();
  struct Expect {
    std::string name;
    std::map<std::string, std::string> labels;
    double min;
    double max;
  };
  const double n = rounds;
  auto with = [](std::map<std::string, std::string> labels) {
    labels["app"] = "metrics_example";
    return labels;
  };
  auto policy = [&](const char* p, const char* outcome) {
    return with({{"policy", p}, {"outcome", outcome}});
  };
  std::vector<Expect> expected = {
      // A's rounds, B's successful attempts, the leader.
      {"dlock_acquire_total", policy("simple", "ok"), 2 * n + 1, 2 * n + 1},
      {"dlock_acquire_total", policy("simple", "aborted"), n, 1e9},
      {"dlock_acquire_total", policy("retry", "ok"), n, n},
      {"dlock_extend_total", policy("simple", "ok"), n + 1, 1e9},
      {"dlock_release_total", policy("simple", "ok"), 2 * n, 2 * n},
      {"dlock_acquire_total", policy("redlock", "ok"), n, n},
      {"dlock_release_total", policy("redlock", "ok"), n, n},
      {"dlock_renewal_total", with({{"outcome", "ok"}}), 1, 1e9},
      {"dlock_leases_held", with({}), 1, 1},
  };
  for (size_t i = 0; i < env.servers(); ++i) {
    expected.push_back({"dlock_redlock_votes_total",
                        with({{"op", "acquire"}, {"server", env.address(i)}, {"outcome", "ok"}}), n,
                        n});
  }
  bool ok = true;
  for (const Expect& e : expected) {
    const double v = Value(t, e.name, e.labels);
    if (v < e.min || v > e.max) {
      std::string labels;
      for (const auto& [k, val] : e.labels) absl::StrAppend(&labels, k, "=", val, " ");
      Say(absl::StrCat("UNEXPECTED: ", e.name, "{", labels, "} = ", v, ", expected [", e.min, ", ",
                       e.max, "]"));
      ok = false;
    }
  }
  for (absl::string_view line : absl::StrSplit(t, '\n')) {
    if (absl::StartsWith(line, "dlock_") && !absl::StrContains(line, "_bucket{")) {
      Say(std::string(line));
    }
  }
  if (!ok) return absl::InternalError("metric values differ from what the rounds did");

  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot write ", port_file));
    }
  }
  const absl::Duration serve_for = absl::GetFlag(FLAGS_serve_for);
  if (serve_for > absl::ZeroDuration()) {
    Say(absl::StrCat("serving http://127.0.0.1:", port, "/metrics for ",
                     absl::FormatDuration(serve_for), " (SIGTERM ends it)"));
    // A periodic wake-up so a signal is noticed within 100 ms. Cancelled
    // before `tick` goes out of scope: the loop runs on (the release below)
    // and a pending wake-up must not call a destroyed function.
    TimerId pending = 0;
    std::function<void()> tick;
    tick = [&] { pending = env.loop()->RunAfter(absl::Milliseconds(100), [&] { tick(); }); };
    tick();
    env.RunUntil([&] { return g_stop != 0 || lost.has_value(); }, serve_for);
    env.loop()->Cancel(pending);
  }
  if (lost.has_value()) return absl::InternalError("leader lease lost: " + lost->ToString());
  std::optional<absl::Status> released;
  if (absl::Status s = watch->Release([&](absl::Status r) { released = r; }); !s.ok()) return s;
  Await(env, released);
  return absl::OkStatus();
}

int Main() {
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 3, /*fake=*/false);
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  auto registry = std::make_shared<prometheus::Registry>();
  PrometheusLockObserver::Options options;
  options.constant_labels = {{"app", "metrics_example"}};
  absl::StatusOr<std::unique_ptr<PrometheusLockObserver>> observer =
      PrometheusLockObserver::Create(registry, options);
  if (!observer.ok()) {
    Say(observer.status().ToString());
    return 1;
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(absl::GetFlag(FLAGS_listen), 1);
  } catch (const std::exception& e) {
    Say(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen), ": ", e.what()));
    return 1;
  }
  exposer->RegisterCollectable(registry);
  std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    Say("the exposer listens on no port");
    return 1;
  }
  absl::Status status = Run(**env, registry, observer->get(), ports[0]);
  Say(status.ok() ? "metrics example done" : absl::StrCat("FAILED: ", status.ToString()));
  return status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
