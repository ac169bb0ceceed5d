#include "dlock/tests/torture/network_driver.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/tests/netfault/fault_proxy.h"
#include "dlock/tests/netfault/isolated_network.h"
#include "dlock/tests/torture/worker_processes.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace torture {

const char* NetFaultName(NetFault f) {
  switch (f) {
    case NetFault::kNone: return "none";
    case NetFault::kDelay: return "delay + jitter";
    case NetFault::kStall: return "stall";
    case NetFault::kReset: return "connection reset";
    case NetFault::kCutHolder: return "holder cut off (netns)";
    case NetFault::kCutMaster: return "master cut off (netns)";
  }
  return "?";
}

namespace {

using netfault::Direction;
using netfault::FaultProxy;
using netfault::IsolatedNetwork;
using test_support::RedisServer;
using test_support::RedisServerOptions;

constexpr int kMaxWorkers = 14;  // 127.0.W.1 addresses, within Redis's 16 binds
const char kLockKey[] = "dlock:{torture}";

absl::Status ParseLog(const std::string& path, int worker, NetworkInput* in,
                      int64_t* acquire_errors) {
  std::ifstream f(path);
  if (!f) return absl::InternalError(absl::StrCat("no worker log ", path));
  std::string line;
  while (std::getline(f, line)) {
    long long a, b, c;
    int d;
    char tok[128];
    if (std::sscanf(line.c_str(), "cs %lld %lld %lld %d %127s", &a, &b, &c, &d, tok) >= 4) {
      CsRecord r;
      r.worker = worker;
      r.fence = a;
      r.start_ns = b;
      r.end_ns = c;
      r.outcome = static_cast<CsOutcome>(d);
      if (std::sscanf(line.c_str(), "cs %*d %*d %*d %*d %127s", tok) == 1) r.token = tok;
      in->cs.push_back(r);
    } else if (std::sscanf(line.c_str(), "rel %127s %lld %lld %d", tok, &a, &b, &d) == 4) {
      ReleaseRecord r;
      r.worker = worker;
      r.token = tok;
      r.sent_ns = a;
      r.done_ns = b;
      r.code = static_cast<absl::StatusCode>(d);
      in->releases.push_back(r);
    } else if (std::sscanf(line.c_str(), "done %lld %lld", &a, &b) == 2) {
      *acquire_errors += b;
    }
  }
  return absl::OkStatus();
}

// One scenario's run; lives on the thread that runs it.
class Run {
 public:
  Run(const NetScenarioSpec& spec, const std::string& worker_path, IsolatedNetwork* net)
      : spec_(spec), worker_path_(worker_path), net_(net) {}

  absl::StatusOr<NetScenarioResult> Go();

 private:
  bool UsesProxies() const {
    return !spec_.sentinel && !spec_.cluster && spec_.fault != NetFault::kCutHolder;
  }
  bool Deployment() const { return spec_.sentinel || spec_.cluster; }
  // The node that holds the lock key now (Sentinel: the master; Cluster:
  // the owner of its slot).
  absl::StatusOr<RedisServer*> KeyNode();
  // The lock servers to audit now (Sentinel: the current master).
  std::vector<std::pair<int, RedisServer*>> AuditTargets();
  std::string LinkHost(int w) const { return absl::StrCat("127.0.", w + 1, ".1"); }
  // Keeps sampling for `d`.
  void Wait(absl::Duration d);
  // Samples while waiting for `pred`, at most `max`; false on timeout.
  bool WaitFor(const std::function<bool()>& pred, absl::Duration max);
  void SampleIfDue();
  int Holder();
  absl::Status Inject();
  absl::Status Lift();
  absl::Status Audit();
  absl::Duration MaxRoundTrip() const {
    return spec_.fault == NetFault::kDelay ? spec_.delay + spec_.jitter : absl::ZeroDuration();
  }
  // How long a worker keeps its loop running after its last release, so a
  // release still in flight on a slow link is not cut off.
  absl::Duration DrainTime() const {
    return absl::Nanoseconds(ReleaseTimeoutNs()) + kRoundTrips * MaxRoundTrip() +
           absl::Milliseconds(100);
  }
  int64_t ReleaseTimeoutNs() const {
    return absl::ToInt64Nanoseconds(spec_.lock_servers == 1 ? spec_.command_timeout
                                                            : spec_.release_timeout);
  }

  NetScenarioSpec spec_;
  std::string worker_path_;
  IsolatedNetwork* net_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::unique_ptr<test_support::SentinelDeployment> sentinel_;
  std::unique_ptr<test_support::RedisCluster> cluster_;
  std::unique_ptr<RedisServer> store_;
  // proxies_[w][s]
  std::vector<std::vector<std::unique_ptr<FaultProxy>>> proxies_;
  std::vector<WorkerProcess> workers_;
  SharedFlags flags_;
  NetworkInput in_;
  NetScenarioResult result_;
  int64_t next_sample_ns_ = 0;
  int rotate_ = 0;
  // The fault in place: which links, since when.
  std::vector<std::pair<int, int>> targets_;  // (worker, server)
  int64_t fault_start_ns_ = 0;
  int master_before_ = -1;
};

absl::StatusOr<RedisServer*> Run::KeyNode() {
  if (sentinel_ != nullptr) {
    absl::StatusOr<int> m = sentinel_->MasterIndex();
    if (!m.ok()) return m.status();
    return &sentinel_->data(*m);
  }
  absl::StatusOr<int> owner = cluster_->OwnerOf(KeySlot(kLockKey));
  if (!owner.ok()) return owner.status();
  return &cluster_->node(*owner);
}

std::vector<std::pair<int, RedisServer*>> Run::AuditTargets() {
  std::vector<std::pair<int, RedisServer*>> v;
  if (Deployment()) {
    absl::StatusOr<RedisServer*> n = KeyNode();
    if (n.ok()) v.emplace_back(0, *n);
    return v;
  }
  for (size_t s = 0; s < servers_.size(); ++s) v.emplace_back(static_cast<int>(s), servers_[s].get());
  return v;
}

void Run::SampleIfDue() {
  if (Deployment()) return;  // the key's node moves: audits only
  const int64_t now = MonotonicNanos();
  if (now < next_sample_ns_) return;
  next_sample_ns_ = now + 20 * 1000000;
  for (size_t s = 0; s < servers_.size(); ++s) {
    const int64_t t = MonotonicNanos();
    auto r = servers_[s]->Command({"GET", kLockKey});
    if (r.ok() && r->is_string()) {
      in_.samples.push_back(KeySample{static_cast<int>(s), t, r->str});
    }
  }
}

void Run::Wait(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
    SampleIfDue();
    absl::SleepFor(std::min(absl::Milliseconds(5), end - absl::Now()));
  }
}

bool Run::WaitFor(const std::function<bool()>& pred, absl::Duration max) {
  const absl::Time end = absl::Now() + max;
  while (!pred()) {
    if (absl::Now() >= end) return false;
    SampleIfDue();
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

int Run::Holder() {
  for (int i = 0; i < spec_.workers; ++i) {
    int w = (rotate_ + i) % spec_.workers;
    if (!workers_[w].exited &&
        flags_.slots[w].load() != static_cast<int32_t>(TortureClient::Phase::kOut)) {
      return w;
    }
  }
  return rotate_ % spec_.workers;
}

absl::Status Run::Inject() {
  targets_.clear();
  if (spec_.fault == NetFault::kCutMaster) {
    absl::StatusOr<RedisServer*> node = KeyNode();
    if (!node.ok()) return node.status();
    netfault::Link link{"127.0.0.1", (*node)->port()};
    for (Direction d : {Direction::kToServer, Direction::kToClient}) {
      if (absl::Status st = net_->Cut(link, d); !st.ok()) return st;
    }
    targets_.emplace_back(-1, 0);
    master_before_ = (*node)->port();
    fault_start_ns_ = MonotonicNanos();
    ++result_.faults_injected;
    return absl::OkStatus();
  }
  const int n = static_cast<int>(servers_.size());
  std::vector<int> target_servers;
  for (int i = 0; i < std::min(spec_.target_servers, n); ++i) {
    target_servers.push_back((rotate_ + i) % n);
  }
  const int holder = Holder();
  for (int w = 0; w < spec_.workers; ++w) {
    if (spec_.holder_only && w != holder) continue;
    for (int s : target_servers) targets_.emplace_back(w, s);
  }
  if (spec_.script_flush) {
    for (int s : target_servers) {
      auto r = servers_[s]->Command({"SCRIPT", "FLUSH"});
      if (!r.ok()) return r.status();
    }
  }
  fault_start_ns_ = MonotonicNanos();
  const int variant = static_cast<int>(result_.faults_injected % 3);
  for (const auto& [w, s] : targets_) {
    switch (spec_.fault) {
      case NetFault::kNone:
        break;
      case NetFault::kDelay:
        for (Direction d : {Direction::kToServer, Direction::kToClient}) {
          proxies_[w][s]->SetDelay(d, spec_.delay / 2, spec_.jitter / 2);
        }
        break;
      case NetFault::kStall:
        for (Direction d : {Direction::kToServer, Direction::kToClient}) {
          proxies_[w][s]->SetStalled(d, true);
        }
        break;
      case NetFault::kReset:
        proxies_[w][s]->ResetConnections();
        break;
      case NetFault::kCutHolder: {
        netfault::Link link{LinkHost(w), servers_[s]->port()};
        if (variant != 2) {
          if (absl::Status st = net_->Cut(link, Direction::kToServer); !st.ok()) return st;
        }
        if (variant != 1) {
          if (absl::Status st = net_->Cut(link, Direction::kToClient); !st.ok()) return st;
        }
        break;
      }
    }
  }
  ++result_.faults_injected;
  ++rotate_;
  return absl::OkStatus();
}

absl::Status Run::Lift() {
  const int64_t now = MonotonicNanos();
  std::vector<bool> hit(std::max<size_t>(1, servers_.size()), false);
  for (const auto& [w, s] : targets_) {
    if (UsesProxies()) proxies_[w][s]->Heal();
    hit[s] = true;
  }
  absl::Status st;
  if (net_ != nullptr) st = net_->Heal();
  for (size_t s = 0; s < hit.size(); ++s) {
    if (!hit[s]) continue;
    Impairment im;
    im.server = static_cast<int>(s);
    im.start_ns = fault_start_ns_;
    // A reset loses what was in flight; its effects last a reconnect.
    im.end_ns = now + absl::ToInt64Nanoseconds(spec_.command_timeout);
    im.loses = spec_.fault != NetFault::kDelay;
    im.resets = spec_.fault == NetFault::kReset;
    im.delay_ns = absl::ToInt64Nanoseconds(MaxRoundTrip());  // the check allows kRoundTrips
    in_.impairments.push_back(im);
  }
  targets_.clear();
  return st;
}

absl::Status Run::Audit() {
  for (const auto& [s, server] : AuditTargets()) {
    const int64_t t = MonotonicNanos();
    auto r = server->Command({"GET", kLockKey});
    if (!r.ok()) return r.status();
    if (!r->is_string()) continue;
    auto pttl = server->Command({"PTTL", kLockKey});
    in_.audit_findings.push_back(AuditFinding{s, t, r->str, pttl.ok() ? ReplyToInt(*pttl) : -3});
  }
  ++in_.audits;
  return absl::OkStatus();
}

absl::StatusOr<NetScenarioResult> Run::Go() {
  if (spec_.workers <= 0 || spec_.workers > kMaxWorkers || spec_.lock_servers <= 0) {
    return absl::InvalidArgumentError("bad worker or server count");
  }
  if ((spec_.fault == NetFault::kCutHolder || spec_.fault == NetFault::kCutMaster) &&
      net_ == nullptr) {
    return absl::InvalidArgumentError("cuts need an IsolatedNetwork");
  }
  if (Deployment() != (spec_.fault == NetFault::kCutMaster) &&
      !(Deployment() && spec_.fault == NetFault::kNone)) {
    return absl::InvalidArgumentError(
        "kCutMaster is for (and the only fault of) Sentinel and Cluster");
  }
  std::string dir = TempRoot();
  if (dir.empty()) return absl::InternalError("mkdtemp failed");
  RedisServerOptions lock_opts;
  if (!UsesProxies()) {
    lock_opts.extra_args = {"--bind", "127.0.0.1"};
    for (int w = 0; w < spec_.workers; ++w) lock_opts.extra_args.push_back(LinkHost(w));
  }
  if (spec_.sentinel) {
    auto d = test_support::SentinelDeployment::Start({});
    if (!d.ok()) return d.status();
    sentinel_ = *std::move(d);
  }
  if (spec_.cluster) {
    auto c = test_support::RedisCluster::Start({});
    if (!c.ok()) return c.status();
    cluster_ = *std::move(c);
  }
  for (int i = 0; i < (Deployment() ? 0 : spec_.lock_servers); ++i) {
    auto s = RedisServer::Start(lock_opts);
    if (!s.ok()) return s.status();
    servers_.push_back(*std::move(s));
  }
  auto store = RedisServer::Start({});
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  std::string shm = dir + "/in_cs";
  if (absl::Status s = flags_.Create(shm); !s.ok()) return s;

  proxies_.resize(spec_.workers);
  workers_.resize(spec_.workers);
  for (int w = 0; w < spec_.workers; ++w) {
    std::vector<std::string> addrs;
    for (int s = 0; s < (Deployment() ? 0 : spec_.lock_servers); ++s) {
      if (UsesProxies()) {
        netfault::FaultProxyOptions po;
        po.target_port = servers_[s]->port();
        po.seed = static_cast<uint64_t>(w * 16 + s + 1);
        auto p = FaultProxy::Start(po);
        if (!p.ok()) return p.status();
        addrs.push_back(absl::StrCat("127.0.0.1:", (*p)->port()));
        proxies_[w].push_back(*std::move(p));
      } else {
        addrs.push_back(absl::StrCat(LinkHost(w), ":", servers_[s]->port()));
      }
    }
    workers_[w].log = absl::StrCat(dir, "/worker", w, ".log");
    std::vector<std::string> args = {
        absl::StrCat("--id=", w),
        spec_.sentinel  ? absl::StrCat("--lock_url=", sentinel_->url())
        : spec_.cluster ? absl::StrCat("--lock_url=", cluster_->url())
                        : absl::StrCat("--lock_addrs=", absl::StrJoin(addrs, ",")),
        absl::StrCat("--store_port=", store_->port()),
        absl::StrCat("--ttl_ms=", absl::ToInt64Milliseconds(spec_.ttl)),
        absl::StrCat("--hold_ms=", absl::ToInt64Milliseconds(spec_.hold)),
        absl::StrCat("--command_timeout_ms=", absl::ToInt64Milliseconds(spec_.command_timeout)),
        absl::StrCat("--release_timeout_ms=", absl::ToInt64Milliseconds(spec_.release_timeout)),
        absl::StrCat("--drain_ms=", absl::ToInt64Milliseconds(DrainTime())),
        absl::StrCat("--redlock_max_ttl_ms=", std::max<int64_t>(
                                                  2000, absl::ToInt64Milliseconds(spec_.ttl))),
        "--check_deadline=true",
        "--wait_ms=500",
        absl::StrCat("--gate=", spec_.audits ? "true" : "false"),
        absl::StrCat("--log=", workers_[w].log),
        absl::StrCat("--shm=", shm),
    };
    if (absl::Status s = SpawnWorker(worker_path_, args, absl::StrCat(dir, "/worker", w, ".err"),
                                     &workers_[w]);
        !s.ok()) {
      for (auto& x : workers_) StopWorker(&x);
      return s;
    }
  }

  result_.spec = spec_;
  const absl::Time start = absl::Now();
  const absl::Time end = start + spec_.duration;
  absl::Status error;
  const int64_t release_ns = ReleaseTimeoutNs();
  while (error.ok() && absl::Now() < end) {
    Wait(std::min(spec_.fault_every, end - absl::Now()));
    // A fault starts only if it can end (and be healed) within the run.
    if (spec_.fault == NetFault::kNone || absl::Now() + spec_.fault_for >= end) continue;
    if (error = Inject(); !error.ok()) break;
    Wait(spec_.fault_for);
    if (error = Lift(); !error.ok()) break;
    if (!spec_.audits) continue;
    // Audit: nobody acquires, everybody idle, every release had its time.
    const int64_t gate_on = MonotonicNanos();
    flags_.slots[kGateSlot].store(1);
    bool idle = WaitFor(
        [&] {
          for (int w = 0; w < spec_.workers; ++w) {
            if (!workers_[w].exited && flags_.slots[kIdleSlotBase + w].load() == 0) return false;
          }
          return true;
        },
        absl::Seconds(15));
    if (Deployment() && master_before_ >= 0) {
      absl::StatusOr<RedisServer*> m = KeyNode();
      if (m.ok() && (*m)->port() != master_before_) ++result_.master_changes;
      master_before_ = -1;
    }
    if (idle) {
      // Bytes delayed before the heal keep their due time, and a release
      // may take several round trips (EVALSHA, NOSCRIPT, EVAL; a transport
      // may also hold it behind an earlier command's script fallback, or
      // load scripts first after a reconnect): kRoundTrips of them.
      // After a cut or stall, TCP retransmits what it held with a backoff
      // that grows with the cut's length.
      const bool held = spec_.fault == NetFault::kCutHolder ||
                        spec_.fault == NetFault::kCutMaster || spec_.fault == NetFault::kStall;
      Wait(absl::Nanoseconds(release_ns) + kRoundTrips * MaxRoundTrip() +
           (held ? spec_.fault_for : absl::ZeroDuration()) + absl::Milliseconds(100));
      error = Audit();
    } else {
      ++result_.audit_timeouts;
    }
    flags_.slots[kGateSlot].store(0);
    in_.gates.emplace_back(gate_on, MonotonicNanos());
  }
  if (absl::Status st = Lift(); error.ok()) error = st;
  // Stop: hold new acquisitions, let what is under way finish (bounded),
  // then SIGTERM everyone at once; each drains its releases before exiting.
  flags_.slots[kGateSlot].store(1);
  WaitFor(
      [&] {
        for (int w = 0; w < spec_.workers; ++w) {
          if (!workers_[w].exited && flags_.slots[kIdleSlotBase + w].load() == 0) return false;
        }
        return true;
      },
      absl::Seconds(5));
  for (auto& w : workers_) {
    if (w.pid > 0 && !w.exited) kill(w.pid, SIGTERM);
  }
  // (The worker's handler takes one SIGTERM; StopWorker would send another.)
  const absl::Time give_up = absl::Now() + DrainTime() + absl::Seconds(10);
  for (auto& w : workers_) {
    while (!w.exited && absl::Now() < give_up) {
      int st;
      if (waitpid(w.pid, &st, WNOHANG) == w.pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
        w.status = st;
        w.exited = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    KillWorker(&w);  // only if still running
  }
  flags_.slots[kGateSlot].store(0);
  result_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (error.ok()) error = Audit();  // nobody is left: every key is a ghost
  if (!error.ok()) return error;

  for (int w = 0; w < spec_.workers; ++w) {
    const WorkerProcess& p = workers_[w];
    if (absl::Status s = CheckWorkerExit(p, absl::StrCat(w)); !s.ok()) return s;
    if (absl::Status s = ParseLog(p.log, w, &in_, &result_.acquire_errors); !s.ok()) return s;
  }
  absl::StatusOr<Reply> mget = store_->Command(ReadCountersCommand());
  if (!mget.ok()) return mget.status();
  absl::StatusOr<Counters> c = ParseCounters(*mget);
  if (!c.ok()) return c.status();
  in_.release_timeout_ns = release_ns;
  in_.ttl_ns = absl::ToInt64Nanoseconds(spec_.ttl);
  in_.single_server = spec_.lock_servers == 1;
  result_.net = CheckNetwork(in_);
  result_.report = CheckRecords(std::move(in_.cs), *c);
  // Proxies and servers close before the namespace goes (destructors).
  proxies_.clear();
  sentinel_.reset();
  cluster_.reset();
  return result_;
}

}  // namespace

absl::StatusOr<NetScenarioResult> RunNetworkScenario(const NetScenarioSpec& spec,
                                                     const std::string& worker_path) {
  if (spec.fault != NetFault::kCutHolder && spec.fault != NetFault::kCutMaster) {
    Run run(spec, worker_path, nullptr);
    return run.Go();
  }
  absl::StatusOr<NetScenarioResult> result = absl::InternalError("not run");
  absl::Status entered = netfault::RunIsolated([&](IsolatedNetwork& net) {
    Run run(spec, worker_path, &net);
    result = run.Go();
  });
  if (!entered.ok()) return entered;
  return result;
}

std::vector<NetScenarioSpec> NetworkScenarios(absl::Duration total) {
  std::vector<NetScenarioSpec> v;
  auto add = [&](std::string name, int servers, NetFault f) -> NetScenarioSpec& {
    NetScenarioSpec s;
    s.name = std::move(name);
    s.lock_servers = servers;
    s.fault = f;
    v.push_back(s);
    return v.back();
  };
  for (int n : {1, 3, 5}) {
    const std::string who = n == 1 ? "single" : absl::StrCat("redlock ", n);
    const int minority = n / 2;
    const int majority = n / 2 + 1;
    // Around the command timeout (200 ms): round trips of 100-300 ms, and
    // the script cache flushed, on a minority of servers for every worker
    // (the one server when n = 1). TTL 5 s: a ghost key outlives every
    // allowance of the checks by seconds.
    NetScenarioSpec& d = add(absl::StrCat(who, ", delay 100-300 ms (command timeout 200 ms), "
                                          "SCRIPT FLUSH, TTL 5 s"),
                             n, NetFault::kDelay);
    d.ttl = absl::Seconds(5);
    d.jitter = absl::Milliseconds(200);
    d.holder_only = false;
    d.target_servers = std::max(1, minority);
    d.script_flush = true;
    // Around the TTL (2 s): round trips of 1.5-2.5 s for the holder.
    NetScenarioSpec& t = add(absl::StrCat(who, ", holder's delay 1.5-2.5 s (TTL 2 s)"), n,
                             NetFault::kDelay);
    t.target_servers = n == 1 ? 1 : majority;
    t.delay = absl::Milliseconds(1500);
    t.jitter = absl::Seconds(1);
    t.fault_for = absl::Milliseconds(2500);
    NetScenarioSpec& st = add(absl::StrCat(who, ", holder stalled 3 s (> TTL)"), n,
                              NetFault::kStall);
    st.target_servers = n == 1 ? 1 : majority;
    st.fault_for = absl::Seconds(3);
    NetScenarioSpec& r = add(absl::StrCat(who, ", connection resets"), n, NetFault::kReset);
    r.holder_only = false;
    r.target_servers = n;
    r.fault_for = absl::Milliseconds(100);
    r.fault_every = absl::Milliseconds(300);
    if (n > 1) {
      NetScenarioSpec& cm = add(absl::StrCat(who, ", holder cut from a minority (", minority,
                                             " of ", n, ")"),
                                n, NetFault::kCutHolder);
      cm.target_servers = minority;
      cm.fault_for = absl::Seconds(3);
    }
    NetScenarioSpec& cj = add(n == 1 ? std::string("single, holder cut off")
                                     : absl::StrCat(who, ", holder cut from a majority (",
                                                    majority, " of ", n, ")"),
                              n, NetFault::kCutHolder);
    cj.target_servers = n == 1 ? 1 : majority;
    cj.fault_for = absl::Seconds(3);
  }
  // Sentinel: the master cut off from everyone for 3 s (the sentinels
  // declare it down after 1 s and fail over), then healed.
  NetScenarioSpec& sm = add("sentinel, master cut off from everyone 3 s", 1,
                            NetFault::kCutMaster);
  sm.sentinel = true;
  sm.fault_for = absl::Seconds(3);
  sm.fault_every = absl::Seconds(4);
  // Cluster: the clients cut off from the master of the lock key's slot
  // for 3 s, then healed.
  NetScenarioSpec& cl = add("cluster, clients cut off from the key's master 3 s", 1,
                            NetFault::kCutMaster);
  cl.cluster = true;
  cl.fault_for = absl::Seconds(3);
  cl.fault_every = absl::Seconds(2);
  const absl::Duration each = std::max(absl::Seconds(4), total / static_cast<int64_t>(v.size()));
  for (auto& s : v) s.duration = each;
  return v;
}

std::string FormatNetworkTable(const std::vector<NetScenarioResult>& results) {
  std::string out =
      "| scenario | fault | faults injected | CS granted | CS completed | overlapping holder "
      "pairs | stale rejected by fencing | lost updates (fenced / unfenced) | audits | ghost "
      "keys found by audits | keys left by a reset (expire with TTL) | ghost keys in live "
      "samples (samples judged) | release → next grant p50 / p99 / max (ms) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const Report& p = r.report;
    const NetworkReport& n = r.net;
    absl::StrAppendFormat(&out,
                          "| %s | %s | %d | %d | %d | %d | %d | %d / %d | %d | %d | %d | %d (%d) | "
                          "%.1f / %.1f / %.1f |\n",
                          r.spec.name, NetFaultName(r.spec.fault), r.faults_injected,
                          p.cs_attempted, p.cs_completed, p.overlaps, p.stale_rejected,
                          p.lost_fenced, p.lost_unfenced, n.audits, n.audit_ghosts,
                          n.left_by_resets, n.live_ghosts, n.samples_judged, n.handover_p50_ms,
                          n.handover_p99_ms, n.handover_max_ms);
  }
  return out;
}

}  // namespace torture
}  // namespace dlock
