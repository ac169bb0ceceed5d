#include "dlock/bench/dlock_workloads.h"

#include <hiredis/hiredis.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/watchdog/watchdog.h"

namespace dlock {
namespace bench {
namespace {

// The dlock objects of one run: transports (one per port), the policy
// (SimpleLock for one port, RedLock for several) and, for contention, a
// RetryLock over it. Loop-bound: build, use and destroy on one thread.
struct DlockStack {
  std::vector<std::unique_ptr<HiredisTransport>> transports;
  std::unique_ptr<SimpleLock> simple;
  std::unique_ptr<RedLock> redlock;
  std::unique_ptr<RetryLock> retry;
  std::unique_ptr<FairLock> fair;  // contend --policy fair (instead of retry)
  Lock* base = nullptr;  // simple or redlock

  bool delayed_restart = true;
  bool info_every_command = false;
  bool fencing = true;
  absl::Duration wake_stagger;  // RetryLockOptions::wake_stagger
  int min_replicas = 0;
  std::string prefix;  // key prefix of this run (set by Build)

  absl::Status Build(uv_loop_t* uv, EventLoop* loop, const RawOptions& o, bool with_retry) {
    for (int port : o.ports) {
      HiredisTransportOptions t;
      t.host = o.host;
      t.port = port;
      auto tr = HiredisTransport::Create(uv, t);
      if (!tr.ok()) return tr.status();
      transports.push_back(*std::move(tr));
    }
    prefix = absl::StrCat(o.prefix, "dlock:");
    if (o.ports.size() == 1) {
      SimpleLockOptions so;
      so.key_prefix = prefix;
      so.replica_ack = dlock::ReplicaAck(min_replicas);
      so.fencing = fencing;
      simple = std::make_unique<SimpleLock>(loop, transports[0].get(), so);
      base = simple.get();
    } else {
      RedLockOptions ro;
      ro.keys.prefix = prefix;
      ro.delayed_restart = delayed_restart;
      ro.check_run_id_every_command = info_every_command;
      ro.fencing = fencing;
      std::vector<Transport*> ts;
      for (auto& t : transports) ts.push_back(t.get());
      auto rl = RedLock::Create(loop, ts, ro);
      if (!rl.ok()) return rl.status();
      redlock = *std::move(rl);
      base = redlock.get();
    }
    if (with_retry) {
      RetryLockOptions ro;
      ro.wake_stagger = wake_stagger;
      // The lock gives its channel and subscriber (SimpleLock also its
      // hand-off queue; RedLock wakes every waiter).
      retry = std::make_unique<RetryLock>(loop, base, ro);
    }
    return absl::OkStatus();
  }

  // Calls `done` once every transport is connected and has declared the
  // run's data set trusted (or with the first error). The bench's prefix is
  // new on never-restarted servers, so its data-set marker may be trusted,
  // as //testing's fixtures do: otherwise RedLock's restart window would
  // refuse the first cycles of a run.
  void ConnectAll(std::function<void(absl::Status)> done) {
    auto left = std::make_shared<int>(static_cast<int>(transports.size()));
    auto first_error = std::make_shared<absl::Status>();
    auto finish = [left, first_error, done](absl::Status st) {
      if (!st.ok() && first_error->ok()) *first_error = st;
      if (--*left == 0) done(*first_error);
    };
    std::vector<std::string> trust = TrustDataSetCommand(KeyScheme{prefix});
    for (auto& t : transports) {
      Transport* tp = t.get();
      absl::Status s = t->Connect([tp, trust, finish](absl::Status st) {
        if (!st.ok()) return finish(st);
        absl::Status sent = tp->Send(
            trust, absl::Seconds(5), [finish](absl::StatusOr<Reply> r) {
              if (!r.ok()) return finish(r.status());
              finish(r->is_error() ? absl::UnavailableError(r->str) : absl::OkStatus());
            });
        if (!sent.ok()) finish(sent);
      });
      if (!s.ok()) finish(s);
    }
  }

  void Destroy() {
    retry.reset();
    fair.reset();
    simple.reset();
    redlock.reset();
    for (auto& t : transports) t->Close();
    transports.clear();
  }
};

// A libuv loop owned by the calling thread, with a UvEventLoop on it.
struct LocalLoop {
  uv_loop_t uv;
  std::unique_ptr<UvEventLoop> loop;
  LocalLoop() {
    uv_loop_init(&uv);
    loop = std::make_unique<UvEventLoop>(&uv);
  }
  template <typename Pred>
  void RunUntil(Pred pred) {
    while (!pred()) uv_run(&uv, UV_RUN_ONCE);
  }
  // Destroys the UvEventLoop, runs the loop dry and closes it.
  void Close() {
    loop.reset();
    uv_run(&uv, UV_RUN_DEFAULT);
    uv_loop_close(&uv);
  }
};

absl::Status OpenLocal(LocalLoop* l, DlockStack* s, const RawOptions& o, bool with_retry) {
  if (absl::Status st = s->Build(&l->uv, l->loop.get(), o, with_retry); !st.ok()) return st;
  bool done = false;
  absl::Status result;
  s->ConnectAll([&](absl::Status st) {
    result = st;
    done = true;
  });
  l->RunUntil([&] { return done; });
  return result;
}

BenchResult Header(const std::string& api, const std::string& workload, int instances) {
  BenchResult r;
  r.peer = absl::StrCat("dlock-", api);
  r.api = api;
  r.workload = workload;
  r.instances = instances;
  return r;
}

// ---------------------------------------------------------------------------
// seq / pipelined, async: `depth` acquire+release chains on one loop.

struct CycleChains {
  Lock* lock = nullptr;
  AcquireOptions acquire;
  std::string keyprefix;
  int64_t target = 0, started = 0, finished = 0, failed = 0;
  absl::Status error;
  LatencyRecorder* lat = nullptr;

  void Start() {
    if (started >= target || !error.ok()) return;
    int64_t i = ++started;
    int64_t t0 = NowNanos();
    auto h = lock->Acquire(absl::StrCat(keyprefix, i), acquire,
                           [this, t0](absl::StatusOr<Lease> l) { OnLease(t0, std::move(l)); });
    if (!h.ok()) {
      error = h.status();
      ++finished;
    }
  }

  void OnLease(int64_t t0, absl::StatusOr<Lease> l) {
    if (!l.ok()) {
      ++failed;
      Done(t0);
      return;
    }
    absl::Status s = lock->Release(*l, [this, t0](absl::Status st) {
      if (!st.ok()) ++failed;
      Done(t0);
    });
    if (!s.ok()) {
      error = s;
      Done(t0);
    }
  }

  void Done(int64_t t0) {
    if (lat != nullptr) lat->Add(NowNanos() - t0);
    ++finished;
    Start();
  }

  void RunPass(LocalLoop* l, int depth, int64_t cycles, LatencyRecorder* rec,
               const std::string& kp) {
    target = cycles;
    started = finished = 0;
    lat = rec;
    keyprefix = kp;
    for (int d = 0; d < depth; ++d) Start();
    l->RunUntil([&] { return finished >= started; });
  }
};

absl::StatusOr<BenchResult> AsyncCycles(const DlockOptions& o, const std::string& workload) {
  LocalLoop l;
  DlockStack s;
  s.delayed_restart = o.redlock_delayed_restart;
  s.info_every_command = o.redlock_info_every_command;
  s.min_replicas = o.min_replicas;
  s.fencing = o.fencing;
  absl::Status st = OpenLocal(&l, &s, o.raw, false);
  if (!st.ok()) {
    s.Destroy();
    l.Close();
    return st;
  }
  CycleChains c;
  c.lock = s.base;
  c.acquire.ttl = absl::Milliseconds(o.raw.ttl_ms);
  int depth = workload == "seq" ? 1 : std::max(1, o.raw.depth);
  c.RunPass(&l, depth, o.raw.warmup, nullptr, "warm:");
  LatencyRecorder lat;
  lat.Reserve(o.raw.n);
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  c.RunPass(&l, depth, o.raw.n, &lat, absl::StrCat(workload, ":"));
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  s.Destroy();
  l.Close();
  if (!c.error.ok()) return c.error;
  BenchResult r = Header("async", workload, static_cast<int>(o.raw.ports.size()));
  if (workload == "pipelined") r.Set("depth", static_cast<int64_t>(depth));
  if (o.min_replicas > 0) r.Set("min_replicas", static_cast<int64_t>(o.min_replicas));
  if (!o.fencing) r.Set("fencing", false);
  if (o.raw.ports.size() > 1) {
    r.Set("delayed_restart", o.redlock_delayed_restart);
    r.Set("info_every_command", o.redlock_info_every_command);
  }
  r.SetCycleStats(o.raw.n, t1 - t0, before, after, &lat);
  r.Set("failed", c.failed);
  return r;
}

// ---------------------------------------------------------------------------
// Blocking facade: the stack lives on a UvLoopThread.

struct ThreadStack {
  UvLoopThread thread;
  DlockStack stack;

  absl::Status Open(const RawOptions& o, bool with_retry) {
    std::promise<absl::Status> p;
    bool posted = thread.Post([&] {
      auto* uvt = &thread;
      absl::Status st = stack.Build(uvt->uv_loop(), uvt->loop(), o, with_retry);
      if (!st.ok()) {
        p.set_value(st);
        return;
      }
      stack.ConnectAll([&p](absl::Status s) { p.set_value(s); });
    });
    if (!posted) return absl::CancelledError("loop thread stopping");
    return p.get_future().get();
  }

  void Close() {
    std::promise<void> p;
    if (thread.Post([&] {
          stack.Destroy();
          p.set_value();
        })) {
      p.get_future().get();
    }
  }
};

absl::StatusOr<BenchResult> BlockingSeq(const DlockOptions& o) {
  ThreadStack ts;
  if (absl::Status st = ts.Open(o.raw, false); !st.ok()) {
    ts.Close();
    return st;
  }
  BlockingLock locks(&ts.thread, ts.stack.base);
  absl::Duration ttl = absl::Milliseconds(o.raw.ttl_ms);
  int64_t failed = 0;
  absl::Status error;
  auto cycle = [&](const std::string& res, LatencyRecorder* lat) {
    int64_t t = NowNanos();
    absl::StatusOr<LockGuard> g = locks.TryLock(res, ttl);
    if (!g.ok()) {
      if (g.status().code() == absl::StatusCode::kInvalidArgument) error = g.status();
      ++failed;
    } else if (!g->Unlock().ok()) {
      ++failed;
    }
    if (lat != nullptr) lat->Add(NowNanos() - t);
  };
  for (int64_t i = 0; i < o.raw.warmup && error.ok(); ++i) cycle(absl::StrCat("warm:", i), nullptr);
  LatencyRecorder lat;
  lat.Reserve(o.raw.n);
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  for (int64_t i = 0; i < o.raw.n && error.ok(); ++i) cycle(absl::StrCat("seq:", i), &lat);
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  const UvLoopThread::Stats turns = ts.thread.stats();
  ts.Close();
  if (!error.ok()) return error;
  BenchResult r = Header("blocking", "seq", static_cast<int>(o.raw.ports.size()));
  r.SetCycleStats(o.raw.n, t1 - t0, before, after, &lat);
  r.Set("failed", failed);
  // Whole run (warm-up included): who ran the loop (see loop_turns.h).
  r.Set("caller_turns", static_cast<int64_t>(turns.caller_turns));
  r.Set("background_turns", static_cast<int64_t>(turns.background_turns));
  r.Set("background_wakeups_during_callers",
        static_cast<int64_t>(turns.background_wakeups_during_callers));
  return r;
}

// ---------------------------------------------------------------------------
// contend: one resource; each critical section does a non-atomic GET then
// SET of a counter plus an INCR, exactly as the raw baselines do.

struct ContendKeys {
  std::string resource = "contend";
  std::string counter, incr;
  explicit ContendKeys(const std::string& prefix)
      : counter(prefix + "dlockcontend:counter"), incr(prefix + "dlockcontend:incr") {}
};

absl::StatusOr<redisContext*> SyncConnect(const RawOptions& o) {
  redisContext* c = redisConnect(o.host.c_str(), o.ports[0]);
  if (c == nullptr || c->err) {
    std::string e = c ? c->errstr : "alloc";
    if (c) redisFree(c);
    return absl::UnavailableError(absl::StrCat("connect: ", e));
  }
  return c;
}

// Runs a command on a sync connection; returns the reply's integer/string
// value as int64 (0 for nil), kUnavailable on failure.
absl::StatusOr<int64_t> SyncInt(redisContext* c, std::vector<std::string> argv) {
  std::vector<const char*> p;
  std::vector<size_t> n;
  for (auto& a : argv) {
    p.push_back(a.data());
    n.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()),
                                                      p.data(), n.data()));
  if (r == nullptr) return absl::UnavailableError(c->errstr);
  int64_t v = 0;
  absl::Status st;
  if (r->type == REDIS_REPLY_ERROR) st = absl::UnavailableError(std::string(r->str, r->len));
  if (r->type == REDIS_REPLY_INTEGER) v = r->integer;
  if (r->type == REDIS_REPLY_STRING) v = std::strtoll(r->str, nullptr, 10);
  freeReplyObject(r);
  if (!st.ok()) return st;
  return v;
}

absl::Status FinishContend(const DlockOptions& o, const ContendKeys& keys,
                           const std::vector<int64_t>& per_worker, int64_t attempts,
                           int64_t wall_ns, const Usage& before, const Usage& after,
                           BenchResult* r) {
  auto c = SyncConnect(o.raw);
  if (!c.ok()) return c.status();
  auto counter = SyncInt(*c, {"GET", keys.counter});
  auto incr = SyncInt(*c, {"GET", keys.incr});
  auto del = SyncInt(*c, {"DEL", keys.counter, keys.incr});
  redisFree(*c);
  if (!counter.ok()) return counter.status();
  if (!incr.ok()) return incr.status();
  int64_t cs = 0;
  for (int64_t v : per_worker) cs += v;
  double wall_s = wall_ns / 1e9;
  r->Set("workers", static_cast<int64_t>(per_worker.size()));
  r->Set("n", cs);
  r->Set("wall_s", wall_s);
  r->Set("cs_per_s", wall_s > 0 ? cs / wall_s : 0.0);
  r->Set("mutex_ok", *counter == o.raw.total && *incr == o.raw.total);
  r->Set("counter", *counter);
  r->Set("incr", *incr);
  r->Set("attempts_per_cs", cs > 0 ? static_cast<double>(attempts) / cs : 0.0);
  r->Set("min_cs_per_worker", *std::min_element(per_worker.begin(), per_worker.end()));
  r->Set("max_cs_per_worker", *std::max_element(per_worker.begin(), per_worker.end()));
  r->Set("client_cpu_us_per_cycle",
         cs > 0 ? static_cast<double>(after.cpu_us - before.cpu_us) / cs : 0.0);
  r->Set("peak_rss_kb", after.peak_rss_kb);
  return absl::OkStatus();
}

// One contending worker: the lock and connection it uses (its own with
// --clients, else the shared ones).
struct AsyncContender {
  struct Shared* sh = nullptr;
  Lock* lock = nullptr;
  Transport* transport = nullptr;
  int64_t done = 0;
};

struct Shared {
  ContendKeys* keys = nullptr;
  AcquireOptions acquire;
  int64_t total = 0, claimed = 0;
  int active = 0;
  int64_t failed = 0;
  absl::Status error;

  void Next(AsyncContender* w) {
    if (claimed >= total || !error.ok()) {
      --active;
      return;
    }
    ++claimed;
    Acquire(w);
  }

  void Acquire(AsyncContender* w) {
    auto h = w->lock->Acquire(keys->resource, acquire,
                           [this, w](absl::StatusOr<Lease> l) { OnLease(w, std::move(l)); });
    if (!h.ok()) Fail(w, h.status());
  }

  void Fail(AsyncContender* w, absl::Status s) {
    if (error.ok()) error = s;
    --active;
  }

  void OnLease(AsyncContender* w, absl::StatusOr<Lease> l) {
    if (!l.ok()) {
      // The wait ran out (should not with a long wait): try again.
      ++failed;
      Acquire(w);
      return;
    }
    auto lease = std::make_shared<Lease>(*std::move(l));
    Transport* transport = w->transport;
    absl::Status s = transport->Send(
        {"GET", keys->counter}, absl::Seconds(5),
        [this, w, transport, lease](absl::StatusOr<Reply> r) {
          if (!r.ok()) return Fail(w, r.status());
          int64_t v = r->is_string() ? std::strtoll(r->str.c_str(), nullptr, 10) : 0;
          auto noop = [](absl::StatusOr<Reply>) {};
          transport->Send({"SET", keys->counter, absl::StrCat(v + 1)}, absl::Seconds(5), noop)
              .IgnoreError();
          transport->Send({"INCR", keys->incr}, absl::Seconds(5), noop).IgnoreError();
          absl::Status rs = w->lock->Release(*lease, [this, w](absl::Status) {
            ++w->done;
            Next(w);
          });
          if (!rs.ok()) Fail(w, rs);
        });
    if (!s.ok()) Fail(w, s);
  }
};

// contend, async. Without --clients: `workers` tasks share one RetryLock
// (and its local hand-off) and one connection. With --clients W: W workers,
// each with its own connection(s), SimpleLock and RetryLock, as W separate
// processes would be (all on one loop thread; they share nothing else).
absl::StatusOr<BenchResult> AsyncContend(const DlockOptions& o) {
  if (o.raw.ports.size() != 1) return absl::InvalidArgumentError("contend: one server");
  if (o.policy != "retry" && o.policy != "fair") {
    return absl::InvalidArgumentError("contend: --policy retry|fair");
  }
  LocalLoop l;
  const bool separate = o.clients > 0;
  const int workers = separate ? o.clients : o.raw.workers;
  std::vector<std::unique_ptr<DlockStack>> stacks(separate ? workers : 1);
  absl::Status st;
  for (auto& s : stacks) {
    s = std::make_unique<DlockStack>();
    s->wake_stagger = o.wake_stagger;
    if (st.ok()) st = OpenLocal(&l, s.get(), o.raw, true);
  }
  auto destroy = [&] {
    for (auto& s : stacks) s->Destroy();
    l.Close();
  };
  if (!st.ok()) {
    destroy();
    return st;
  }
  ContendKeys keys(o.raw.prefix);
  Shared sh;
  sh.keys = &keys;
  sh.acquire.ttl = absl::Milliseconds(o.raw.ttl_ms);
  sh.acquire.wait = absl::Seconds(60);
  sh.total = o.raw.total;
  std::vector<AsyncContender> ws(workers);
  const bool fair = o.policy == "fair";
  for (int i = 0; i < workers; ++i) {
    DlockStack& s = *stacks[separate ? i : 0];
    if (fair && s.fair == nullptr) {
      FairLockOptions fo;
      fo.key_prefix = absl::StrCat(o.raw.prefix, "dlock:");
      s.fair = std::make_unique<FairLock>(l.loop.get(), s.transports[0].get(), fo);
    }
    ws[i].sh = &sh;
    ws[i].lock = fair ? static_cast<Lock*>(s.fair.get()) : s.retry.get();
    ws[i].transport = s.transports[0].get();
  }
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  sh.active = workers;
  for (auto& w : ws) sh.Next(&w);
  l.RunUntil([&] { return sh.active == 0; });
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  // Acquire scripts sent (RetryLock: inner attempts; FairLock: joins,
  // wake-ups and refreshes).
  int64_t attempts = 0;
  int64_t queue_calls = 0;  // RetryLock's hand-off queue scripts (joins, refreshes, leaves)
  for (auto& s : stacks) attempts += fair ? s->fair->attempts() : s->retry->attempts();
  if (!fair) {
    for (auto& s : stacks) queue_calls += s->retry->queue_calls();
  }
  destroy();
  if (!sh.error.ok()) return sh.error;
  std::vector<int64_t> per;
  for (auto& w : ws) per.push_back(w.done);
  BenchResult r = Header("async", "contend", 1);
  if (separate) r.Set("clients", static_cast<int64_t>(workers));
  r.SetString("policy", o.policy);
  r.Set("wake_stagger_us", absl::ToInt64Microseconds(o.wake_stagger));
  if (!fair) {
    const int64_t cs = sh.claimed;
    r.Set("queue_calls_per_cs", cs > 0 ? static_cast<double>(queue_calls) / cs : 0.0);
  }
  if (absl::Status fs = FinishContend(o, keys, per, attempts, t1 - t0, before, after, &r);
      !fs.ok()) {
    return fs;
  }
  return r;
}

absl::StatusOr<BenchResult> BlockingContend(const DlockOptions& o) {
  if (o.raw.ports.size() != 1) return absl::InvalidArgumentError("contend: one server");
  ThreadStack ts;
  if (absl::Status st = ts.Open(o.raw, true); !st.ok()) {
    ts.Close();
    return st;
  }
  BlockingLock locks(&ts.thread, ts.stack.retry.get());
  ContendKeys keys(o.raw.prefix + "blocking:");
  std::atomic<int64_t> claimed{0};
  std::vector<int64_t> per(o.raw.workers, 0);
  std::vector<absl::Status> errors(o.raw.workers);
  absl::Duration ttl = absl::Milliseconds(o.raw.ttl_ms);
  auto worker = [&](int w) {
    auto c = SyncConnect(o.raw);
    if (!c.ok()) {
      errors[w] = c.status();
      return;
    }
    while (claimed.fetch_add(1) < o.raw.total) {
      absl::StatusOr<LockGuard> g = locks.Lock(keys.resource, ttl, absl::Seconds(60));
      while (!g.ok() && g.status().code() == absl::StatusCode::kDeadlineExceeded) {
        g = locks.Lock(keys.resource, ttl, absl::Seconds(60));
      }
      if (!g.ok()) {
        errors[w] = g.status();
        break;
      }
      auto v = SyncInt(*c, {"GET", keys.counter});
      if (!v.ok()) {
        errors[w] = v.status();
        break;
      }
      auto s1 = SyncInt(*c, {"SET", keys.counter, absl::StrCat(*v + 1)});
      auto s2 = SyncInt(*c, {"INCR", keys.incr});
      if (!s1.ok() || !s2.ok()) {
        errors[w] = !s1.ok() ? s1.status() : s2.status();
        break;
      }
      g->Unlock().IgnoreError();
      ++per[w];
    }
    redisFree(*c);
  };
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  std::vector<std::thread> threads;
  for (int w = 0; w < o.raw.workers; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  std::promise<int64_t> ap;
  if (ts.thread.Post([&] { ap.set_value(ts.stack.retry->attempts()); })) {
  } else {
    ap.set_value(0);
  }
  int64_t attempts = ap.get_future().get();
  ts.Close();
  for (auto& e : errors) {
    if (!e.ok()) return e;
  }
  BenchResult r = Header("blocking", "contend", 1);
  if (absl::Status fs = FinishContend(o, keys, per, attempts, t1 - t0, before, after, &r);
      !fs.ok())
    return fs;
  return r;
}

// ---------------------------------------------------------------------------
// watchdog: L leases held and renewed by one Watchdog for S seconds.

// Forwards to a Lock and counts the extends sent (the watchdog's renewals).
// It passes the watchdog's callback through untouched: wrapping it would add
// an allocation per renewal in flight to the memory this workload measures.
class CountingLock : public Lock {
 public:
  explicit CountingLock(Lock* inner) : inner_(inner) {}
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource, const AcquireOptions& o,
                                        LeaseCallback cb) override {
    return inner_->Acquire(resource, o, std::move(cb));
  }
  absl::Status Release(const Lease& lease, StatusCallback cb) override {
    return inner_->Release(lease, std::move(cb));
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl, LeaseCallback cb) override {
    ++sent;
    return inner_->Extend(lease, ttl, std::move(cb));
  }
  int64_t sent = 0;

 private:
  Lock* inner_;
};

// Counts the watchdog's successful renewals (WatchdogOptions::observer).
class RenewalCounter : public LockObserver {
 public:
  void OnRenewal(const RenewalEvent& event) override {
    if (event.status.ok()) ++ok;
  }
  int64_t ok = 0;
};

absl::StatusOr<std::pair<int64_t, int64_t>> NetBytes(const RawOptions& o) {
  auto c = SyncConnect(o);
  if (!c.ok()) return c.status();
  auto* r = static_cast<redisReply*>(redisCommand(*c, "INFO stats"));
  if (r == nullptr || r->type != REDIS_REPLY_STRING) {
    if (r) freeReplyObject(r);
    redisFree(*c);
    return absl::UnavailableError("INFO stats");
  }
  int64_t in = 0, out = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(r->str, r->len), "\r\n")) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ':');
    if (kv.first == "total_net_input_bytes") (void)absl::SimpleAtoi(kv.second, &in);
    if (kv.first == "total_net_output_bytes") (void)absl::SimpleAtoi(kv.second, &out);
  }
  freeReplyObject(r);
  redisFree(*c);
  return std::make_pair(in, out);
}

absl::StatusOr<BenchResult> WatchdogRun(const DlockOptions& o) {
  if (o.raw.ports.size() != 1) return absl::InvalidArgumentError("watchdog: one server");
  LocalLoop l;
  DlockStack s;
  absl::Status st = OpenLocal(&l, &s, o.raw, false);
  if (!st.ok()) {
    s.Destroy();
    l.Close();
    return st;
  }
  CountingLock counting(s.base);
  RenewalCounter renewed;
  WatchdogOptions wdo;
  wdo.observer = &renewed;
  auto wd = std::make_unique<Watchdog>(l.loop.get(), &counting, wdo);
  AcquireOptions ao;
  ao.ttl = absl::Milliseconds(o.raw.ttl_ms);
  // Acquire the leases, at most 256 in flight, and watch each one as soon
  // as it is granted (its deadline runs from its own acquisition).
  int64_t acquired = 0, answered = 0, acquire_failed = 0, lost = 0;
  std::vector<WatchHandle> watches;
  watches.reserve(o.leases);
  int64_t next = 0;
  std::function<void()> launch = [&] {
    while (next < o.leases && next - answered < 256) {
      int64_t i = next++;
      auto h = s.base->Acquire(absl::StrCat("lease:", i), ao, [&](absl::StatusOr<Lease> lease) {
        ++answered;
        if (lease.ok()) {
          ++acquired;
          WatchOptions wo;
          wo.on_lost = [&lost](absl::Status) { ++lost; };
          auto w = wd->Watch(*lease, std::move(wo));
          if (w.ok()) {
            watches.push_back(*std::move(w));
          } else if (st.ok()) {
            st = w.status();
          }
        } else {
          ++acquire_failed;
        }
        launch();
      });
      if (!h.ok()) {
        ++answered;
        ++acquire_failed;
      }
    }
  };
  launch();
  l.RunUntil([&] { return answered >= o.leases; });
  int64_t lost_while_acquiring = lost;

  auto bytes0 = NetBytes(o.raw);
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  int64_t renew0 = renewed.ok;
  bool elapsed = false;
  l.loop->RunAfter(absl::Seconds(o.seconds), [&] { elapsed = true; });
  if (st.ok()) l.RunUntil([&] { return elapsed; });
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  auto bytes1 = NetBytes(o.raw);
  int64_t renewals = renewed.ok - renew0;
  int64_t extends_sent = counting.sent;
  // Release everything still watched.
  int64_t releasing = 0;
  for (auto& w : watches) {
    if (!w.active()) continue;
    if (w.Release([&](absl::Status) { --releasing; }).ok()) ++releasing;
  }
  l.RunUntil([&] { return releasing == 0; });
  watches.clear();
  wd.reset();
  s.Destroy();
  l.Close();
  if (!st.ok()) return st;
  BenchResult r = Header("async", "watchdog", 1);
  double secs = (t1 - t0) / 1e9;
  r.Set("leases", static_cast<int64_t>(o.leases));
  r.Set("acquired", acquired);
  r.Set("acquire_failed", acquire_failed);
  r.Set("ttl_ms", static_cast<int64_t>(o.raw.ttl_ms));
  r.Set("seconds", secs);
  r.Set("lost", lost);
  r.Set("lost_while_acquiring", lost_while_acquiring);
  r.Set("renewals", renewals);
  r.Set("extends_sent", extends_sent);
  r.Set("renewals_per_s", secs > 0 ? renewals / secs : 0.0);
  r.Set("loop_cpu_pct", secs > 0 ? (after.cpu_us - before.cpu_us) / (secs * 1e4) : 0.0);
  if (renewals > 0) {
    r.Set("client_cpu_us_per_cycle", static_cast<double>(after.cpu_us - before.cpu_us) / renewals);
  }
  if (bytes0.ok() && bytes1.ok() && renewals > 0) {
    int64_t bytes = (bytes1->first - bytes0->first) + (bytes1->second - bytes0->second);
    r.Set("bytes_per_lease_renewal", static_cast<double>(bytes) / renewals);
    r.Set("bytes_per_lease_per_s", static_cast<double>(bytes) / (acquired * secs));
  }
  r.Set("peak_rss_kb", after.peak_rss_kb);
  return r;
}

}  // namespace

absl::StatusOr<BenchResult> RunDlock(const DlockOptions& o, const std::string& workload) {
  if (o.raw.ports.empty()) return absl::InvalidArgumentError("no ports");
  if (o.api == "async") {
    if (workload == "seq" || workload == "pipelined") return AsyncCycles(o, workload);
    if (workload == "contend") return AsyncContend(o);
    if (workload == "watchdog") return WatchdogRun(o);
  } else if (o.api == "blocking") {
    if (workload == "seq") return BlockingSeq(o);
    if (workload == "contend") return BlockingContend(o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no dlock workload '", workload, "' with --api ", o.api));
}

}  // namespace bench
}  // namespace dlock
