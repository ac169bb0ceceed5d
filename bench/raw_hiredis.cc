#include "dlock/bench/raw_hiredis.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/lock/scripts.h"

namespace dlock {
namespace bench {

const char kRawReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

namespace {

// 128 random bits as 32 hex characters (the same size as dlock's tokens).
class TokenSource {
 public:
  std::string Next() {
    return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen_),
                           absl::Uniform<uint64_t>(gen_));
  }

 private:
  absl::BitGen gen_;
};

struct SyncConn {
  redisContext* c = nullptr;
  ~SyncConn() {
    if (c != nullptr) redisFree(c);
  }
};

absl::Status SyncConnect(const std::string& host, int port, SyncConn* out) {
  out->c = redisConnect(host.c_str(), port);
  if (out->c == nullptr || out->c->err) {
    return absl::UnavailableError(absl::StrCat(
        "connect ", host, ":", port, ": ", out->c ? out->c->errstr : "alloc"));
  }
  return absl::OkStatus();
}

// Runs argv on a sync connection; kUnavailable on I/O or error reply.
absl::StatusOr<redisReply*> SyncArgv(redisContext* c,
                                     const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (r == nullptr) return absl::UnavailableError(absl::StrCat("io: ", c->errstr));
  if (r->type == REDIS_REPLY_ERROR) {
    std::string msg(r->str, r->len);
    freeReplyObject(r);
    return absl::UnavailableError(msg);
  }
  return r;
}

absl::StatusOr<std::string> LoadScript(const std::string& host, int port,
                                       const std::string& source = kRawReleaseScript) {
  SyncConn conn;
  if (absl::Status s = SyncConnect(host, port, &conn); !s.ok()) return s;
  auto r = SyncArgv(conn.c, {"SCRIPT", "LOAD", source});
  if (!r.ok()) return r.status();
  std::string sha((*r)->str, (*r)->len);
  freeReplyObject(*r);
  return sha;
}

absl::StatusOr<int64_t> SyncGetInt(const std::string& host, int port,
                                   const std::string& key) {
  SyncConn conn;
  if (absl::Status s = SyncConnect(host, port, &conn); !s.ok()) return s;
  auto r = SyncArgv(conn.c, {"GET", key});
  if (!r.ok()) return r.status();
  int64_t v = 0;
  if ((*r)->type == REDIS_REPLY_STRING) v = std::strtoll((*r)->str, nullptr, 10);
  freeReplyObject(*r);
  return v;
}

absl::Status SyncDel(const std::string& host, int port,
                     const std::vector<std::string>& keys) {
  SyncConn conn;
  if (absl::Status s = SyncConnect(host, port, &conn); !s.ok()) return s;
  std::vector<std::string> argv = {"DEL"};
  argv.insert(argv.end(), keys.begin(), keys.end());
  auto r = SyncArgv(conn.c, argv);
  if (!r.ok()) return r.status();
  freeReplyObject(*r);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Async plumbing: one uv loop, one hiredis async connection per server.

struct AsyncRig {
  uv_loop_t loop;
  std::vector<redisAsyncContext*> conns;
  absl::Status error;  // first failure seen
  int connected = 0;

  absl::Status Open(const std::string& host, const std::vector<int>& ports) {
    uv_loop_init(&loop);
    for (int port : ports) {
      redisAsyncContext* ac = redisAsyncConnect(host.c_str(), port);
      if (ac == nullptr || ac->err) {
        return absl::UnavailableError(
            absl::StrCat("connect ", port, ": ", ac ? ac->errstr : "alloc"));
      }
      ac->data = this;
      redisLibuvAttach(ac, &loop);
      redisAsyncSetDisconnectCallback(ac, [](const redisAsyncContext*, int) {});
      conns.push_back(ac);
    }
    return absl::OkStatus();
  }

  // Disconnects (after pending replies), runs the loop dry, closes it.
  void Close() {
    for (redisAsyncContext* ac : conns) redisAsyncDisconnect(ac);
    conns.clear();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }

  void Fail(const std::string& what) {
    if (error.ok()) error = absl::UnavailableError(what);
  }
};

int SendArgv(redisAsyncContext* ac, redisCallbackFn* fn, void* priv,
             std::initializer_list<const std::string*> args) {
  constexpr size_t kMax = 12;
  const char* ptrs[kMax];
  size_t lens[kMax];
  int i = 0;
  if (args.size() > kMax) return REDIS_ERR;
  for (const std::string* a : args) {
    ptrs[i] = a->data();
    lens[i] = a->size();
    ++i;
  }
  return redisAsyncCommandArgv(ac, fn, priv, i, ptrs, lens);
}

// One acquire+release chain of the seq / pipelined workloads.
struct CycleRunner;
struct Chain;
// What one command's reply belongs to: a chain and its phase. A reply for
// a phase the chain has left (at_quorum) is drained and ignored.
struct Slot {
  Chain* c = nullptr;
  uint64_t phase = 0;
};
struct Chain {
  CycleRunner* r = nullptr;
  uint64_t phase = 0;  // bumped at every acquire and release phase
  int replied = 0;     // replies in the current phase
  int ok = 0;          // servers that granted the lock
  std::string key;
  std::string channel;
  std::string token;
  int64_t start_ns = 0;
  // Ring of reply slots, one per command sent (reused round-robin; far more
  // than can be outstanding).
  std::vector<Slot> slots = std::vector<Slot>(1024);
  size_t next_slot = 0;
  Slot* NextSlot() {
    Slot* s = &slots[next_slot++ % slots.size()];
    s->c = this;
    s->phase = phase;
    return s;
  }
  void NextPhase() {
    ++phase;
    replied = 0;
    ok = 0;
  }
};

struct CycleRunner {
  AsyncRig* rig = nullptr;
  const RawOptions* o = nullptr;
  std::string sha;
  std::string acquire_sha;  // dlock_scripts only
  std::string ttl;
  std::string keyprefix;
  int64_t target = 0;   // cycles to run in this pass
  int64_t started = 0;
  int64_t finished = 0;
  int64_t failed = 0;
  LatencyRecorder* lat = nullptr;  // null during warmup
  TokenSource tokens;
  std::vector<Chain> chains;
  std::string kSet = "SET", kNx = "NX", kPx = "PX", kEvalsha = "EVALSHA", kOne = "1",
              kThree = "3", kZero = "0";
  // dlock's acquire script also takes the data-set marker (read only with
  // a restart window; 0 here) and the server's fence mark.
  std::string marker = "dlock:data-set-began", hwm = "dlock:fence-hwm";

  int servers() const { return static_cast<int>(rig->conns.size()); }
  int quorum() const { return servers() / 2 + 1; }

  void StartCycle(Chain* c) {
    if (started >= target || !rig->error.ok()) return;
    ++started;
    c->token = tokens.Next();
    c->start_ns = NowNanos();
    c->NextPhase();
    if (o->dlock_scripts) {
      // dlock's key scheme: P{R}, P{R}:released.
      std::string r = absl::StrCat(keyprefix, started);
      c->key = absl::StrCat("{", r, "}");
      c->channel = absl::StrCat(c->key, ":released");
    } else {
      c->key = absl::StrCat(keyprefix, started);
    }
    for (redisAsyncContext* ac : rig->conns) {
      if (o->dlock_scripts) {
        SendArgv(ac, &CycleRunner::OnAcquire, c->NextSlot(),
                 {&kEvalsha, &acquire_sha, &kThree, &c->key, &marker, &hwm,
                  &c->token, &ttl, &kZero});
      } else {
        SendArgv(ac, &CycleRunner::OnAcquire, c->NextSlot(),
                 {&kSet, &c->key, &c->token, &kNx, &kPx, &ttl});
      }
    }
  }

  static void OnAcquire(redisAsyncContext*, void* rv, void* priv) {
    auto* slot = static_cast<Slot*>(priv);
    Chain* c = slot->c;
    CycleRunner* r = c->r;
    if (slot->phase != c->phase) return;  // drained after the quorum moved on
    auto* reply = static_cast<redisReply*>(rv);
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      r->rig->Fail(reply ? std::string(reply->str, reply->len) : "disconnected");
    } else if (reply->type == REDIS_REPLY_STATUS || reply->type == REDIS_REPLY_INTEGER) {
      ++c->ok;
    }
    ++c->replied;
    const bool decided = r->o->at_quorum ? (c->ok >= r->quorum() || c->replied == r->servers())
                                         : c->replied == r->servers();
    if (!decided) return;
    // Quorum check as a real client would; release on every server either way.
    if (c->ok < r->quorum()) ++r->failed;
    c->NextPhase();
    for (redisAsyncContext* ac : r->rig->conns) {
      if (r->o->dlock_scripts) {
        SendArgv(ac, &CycleRunner::OnRelease, c->NextSlot(),
                 {&r->kEvalsha, &r->sha, &r->kOne, &c->key, &c->token, &c->channel});
      } else {
        SendArgv(ac, &CycleRunner::OnRelease, c->NextSlot(),
                 {&r->kEvalsha, &r->sha, &r->kOne, &c->key, &c->token});
      }
    }
  }

  static void OnRelease(redisAsyncContext*, void* rv, void* priv) {
    auto* slot = static_cast<Slot*>(priv);
    Chain* c = slot->c;
    CycleRunner* r = c->r;
    if (slot->phase != c->phase) return;  // drained after the quorum moved on
    auto* reply = static_cast<redisReply*>(rv);
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      r->rig->Fail(reply ? std::string(reply->str, reply->len) : "disconnected");
    }
    ++c->replied;
    if (c->replied < (r->o->at_quorum ? r->quorum() : r->servers())) return;
    c->NextPhase();
    if (r->lat != nullptr) r->lat->Add(NowNanos() - c->start_ns);
    ++r->finished;
    r->StartCycle(c);
  }

  void RunPass(int64_t cycles, LatencyRecorder* recorder, const std::string& kp) {
    target = cycles;
    started = finished = 0;
    lat = recorder;
    keyprefix = kp;
    for (Chain& c : chains) StartCycle(&c);
    // The loop keeps running while connections are open, so step it until
    // this pass is done.
    while (finished < started && rig->error.ok()) uv_run(&rig->loop, UV_RUN_ONCE);
  }
};

}  // namespace

absl::StatusOr<BenchResult> RawAsyncCycles(const RawOptions& o,
                                           const std::string& workload) {
  if (o.ports.empty()) return absl::InvalidArgumentError("no ports");
  std::string sha, acquire_sha;
  for (int port : o.ports) {
    auto s = LoadScript(o.host, port,
                        o.dlock_scripts ? ReleaseScript().source() : kRawReleaseScript);
    if (!s.ok()) return s.status();
    sha = *s;
    if (o.dlock_scripts) {
      auto a = LoadScript(o.host, port, AcquireScript().source());
      if (!a.ok()) return a.status();
      acquire_sha = *a;
    }
  }
  AsyncRig rig;
  if (absl::Status s = rig.Open(o.host, o.ports); !s.ok()) return s;
  CycleRunner runner;
  runner.rig = &rig;
  runner.o = &o;
  runner.sha = sha;
  runner.acquire_sha = acquire_sha;
  runner.ttl = absl::StrCat(o.ttl_ms);
  int depth = workload == "seq" ? 1 : std::max(1, o.depth);
  runner.chains.resize(depth);
  for (Chain& c : runner.chains) c.r = &runner;

  runner.RunPass(o.warmup, nullptr, absl::StrCat(o.prefix, "raw:warm:"));
  LatencyRecorder lat;
  lat.Reserve(o.n);
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  runner.RunPass(o.n, &lat, absl::StrCat(o.prefix, "raw:", workload, ":"));
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  absl::Status err = rig.error;
  rig.Close();
  if (!err.ok()) return err;

  BenchResult r;
  r.peer = o.dlock_scripts ? "hiredis-raw-dlock-scripts" : "hiredis-raw";
  r.api = "async";
  r.workload = workload;
  r.instances = static_cast<int>(o.ports.size());
  if (workload == "pipelined") r.Set("depth", static_cast<int64_t>(depth));
  if (o.ports.size() > 1) r.Set("at_quorum", o.at_quorum);
  r.SetCycleStats(o.n, t1 - t0, before, after, &lat);
  r.Set("failed", runner.failed);
  return r;
}

absl::StatusOr<BenchResult> RawSyncSeq(const RawOptions& o) {
  if (o.ports.size() != 1) {
    return absl::InvalidArgumentError("raw sync seq runs on one server");
  }
  // --dlock_scripts: dlock's fenced acquire and release scripts (the server
  // work of `--peer dlock --api blocking`), as the async row does.
  auto sha = LoadScript(o.host, o.ports[0],
                        o.dlock_scripts ? ReleaseScript().source() : kRawReleaseScript);
  if (!sha.ok()) return sha.status();
  std::string acquire_sha;
  if (o.dlock_scripts) {
    auto a = LoadScript(o.host, o.ports[0], AcquireScript().source());
    if (!a.ok()) return a.status();
    acquire_sha = *a;
  }
  SyncConn conn;
  if (absl::Status s = SyncConnect(o.host, o.ports[0], &conn); !s.ok()) return s;
  TokenSource tokens;
  std::string ttl = absl::StrCat(o.ttl_ms);
  LatencyRecorder lat;
  lat.Reserve(o.n);
  int64_t failed = 0;
  auto cycle = [&](const std::string& name, bool record) -> absl::Status {
    int64_t t = NowNanos();
    std::string token = tokens.Next();
    // dlock's key scheme: P{R}, P{R}:released.
    const std::string key = o.dlock_scripts ? absl::StrCat("{", name, "}") : name;
    auto a = o.dlock_scripts
                 ? SyncArgv(conn.c, {"EVALSHA", acquire_sha, "3", key, "dlock:data-set-began",
                                     "dlock:fence-hwm", token, ttl, "0"})
                 : SyncArgv(conn.c, {"SET", key, token, "NX", "PX", ttl});
    if (!a.ok()) return a.status();
    if ((*a)->type != REDIS_REPLY_STATUS && (*a)->type != REDIS_REPLY_INTEGER) ++failed;
    freeReplyObject(*a);
    auto rel = o.dlock_scripts
                   ? SyncArgv(conn.c, {"EVALSHA", *sha, "1", key, token,
                                       absl::StrCat(key, ":released")})
                   : SyncArgv(conn.c, {"EVALSHA", *sha, "1", key, token});
    if (!rel.ok()) return rel.status();
    freeReplyObject(*rel);
    if (record) lat.Add(NowNanos() - t);
    return absl::OkStatus();
  };
  for (int64_t i = 0; i < o.warmup; ++i) {
    if (absl::Status s = cycle(absl::StrCat(o.prefix, "rawsync:warm:", i), false); !s.ok())
      return s;
  }
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  for (int64_t i = 0; i < o.n; ++i) {
    if (absl::Status s = cycle(absl::StrCat(o.prefix, "rawsync:seq:", i), true); !s.ok())
      return s;
  }
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  BenchResult r;
  r.peer = o.dlock_scripts ? "hiredis-raw-dlock-scripts" : "hiredis-raw";
  r.api = "sync";
  r.workload = "seq";
  r.instances = 1;
  r.SetCycleStats(o.n, t1 - t0, before, after, &lat);
  r.Set("failed", failed);
  return r;
}

namespace {

struct ContendKeys {
  std::string lock, counter, incr;
  explicit ContendKeys(const std::string& prefix)
      : lock(prefix + "rawcontend:lock"),
        counter(prefix + "rawcontend:counter"),
        incr(prefix + "rawcontend:incr") {}
};

// Fills the contention fields from per-worker counts and the final counters.
absl::Status FinishContend(const RawOptions& o, const ContendKeys& keys,
                           const std::vector<int64_t>& per_worker,
                           int64_t attempts, int64_t wall_ns, const Usage& before,
                           const Usage& after, BenchResult* r) {
  auto counter = SyncGetInt(o.host, o.ports[0], keys.counter);
  if (!counter.ok()) return counter.status();
  auto incr = SyncGetInt(o.host, o.ports[0], keys.incr);
  if (!incr.ok()) return incr.status();
  int64_t cs = 0;
  for (int64_t c : per_worker) cs += c;
  double wall_s = wall_ns / 1e9;
  r->Set("workers", static_cast<int64_t>(per_worker.size()));
  r->Set("n", cs);
  r->Set("wall_s", wall_s);
  r->Set("cs_per_s", wall_s > 0 ? cs / wall_s : 0.0);
  r->Set("mutex_ok", *counter == o.total && *incr == o.total);
  r->Set("counter", *counter);
  r->Set("incr", *incr);
  r->Set("attempts_per_cs", cs > 0 ? static_cast<double>(attempts) / cs : 0.0);
  r->Set("min_cs_per_worker", *std::min_element(per_worker.begin(), per_worker.end()));
  r->Set("max_cs_per_worker", *std::max_element(per_worker.begin(), per_worker.end()));
  r->Set("client_cpu_us_per_cycle",
         cs > 0 ? static_cast<double>(after.cpu_us - before.cpu_us) / cs : 0.0);
  r->Set("peak_rss_kb", after.peak_rss_kb);
  return SyncDel(o.host, o.ports[0], {keys.counter, keys.incr, keys.lock});
}

}  // namespace

absl::StatusOr<BenchResult> RawSyncContend(const RawOptions& o) {
  if (o.ports.size() != 1) return absl::InvalidArgumentError("raw contend: one server");
  auto sha = LoadScript(o.host, o.ports[0]);
  if (!sha.ok()) return sha.status();
  ContendKeys keys(o.prefix);
  if (absl::Status s = SyncDel(o.host, o.ports[0], {keys.counter, keys.incr, keys.lock});
      !s.ok())
    return s;
  std::atomic<int64_t> claimed{0};
  std::atomic<int64_t> attempts{0};
  std::vector<int64_t> per_worker(o.workers, 0);
  std::vector<absl::Status> errors(o.workers);
  std::string ttl = absl::StrCat(o.ttl_ms);

  auto worker = [&](int w) {
    SyncConn conn;
    if (absl::Status s = SyncConnect(o.host, o.ports[0], &conn); !s.ok()) {
      errors[w] = s;
      return;
    }
    TokenSource tokens;
    int64_t my_attempts = 0;
    while (claimed.fetch_add(1) < o.total) {
      std::string token = tokens.Next();
      for (;;) {
        ++my_attempts;
        auto a = SyncArgv(conn.c, {"SET", keys.lock, token, "NX", "PX", ttl});
        if (!a.ok()) {
          errors[w] = a.status();
          return;
        }
        bool got = (*a)->type == REDIS_REPLY_STATUS;
        freeReplyObject(*a);
        if (got) break;
        usleep(o.retry_ms * 1000);
      }
      // Critical section: non-atomic read-modify-write plus an INCR.
      auto g = SyncArgv(conn.c, {"GET", keys.counter});
      if (!g.ok()) {
        errors[w] = g.status();
        return;
      }
      int64_t v = (*g)->type == REDIS_REPLY_STRING ? std::strtoll((*g)->str, nullptr, 10) : 0;
      freeReplyObject(*g);
      for (auto argv : {std::vector<std::string>{"SET", keys.counter, absl::StrCat(v + 1)},
                        std::vector<std::string>{"INCR", keys.incr},
                        std::vector<std::string>{"EVALSHA", *sha, "1", keys.lock, token}}) {
        auto x = SyncArgv(conn.c, argv);
        if (!x.ok()) {
          errors[w] = x.status();
          return;
        }
        freeReplyObject(*x);
      }
      ++per_worker[w];
    }
    attempts += my_attempts;
  };

  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  std::vector<std::thread> threads;
  for (int w = 0; w < o.workers; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  for (const auto& e : errors) {
    if (!e.ok()) return e;
  }
  BenchResult r;
  r.peer = "hiredis-raw";
  r.api = "sync";
  r.workload = "contend";
  r.instances = 1;
  r.Set("retry_ms", static_cast<int64_t>(o.retry_ms));
  if (absl::Status s = FinishContend(o, keys, per_worker, attempts.load(), t1 - t0,
                                     before, after, &r);
      !s.ok())
    return s;
  return r;
}

namespace {

// One contending task on the shared loop and connection.
struct ContendTask {
  struct ContendRunner* r = nullptr;
  int id = 0;
  uv_timer_t* timer = nullptr;  // heap: freed in its close callback
  std::string token;
  int64_t done = 0;
  int64_t attempts = 0;
};

struct ContendRunner {
  AsyncRig* rig = nullptr;
  const RawOptions* o = nullptr;
  ContendKeys* keys = nullptr;
  std::string sha, ttl;
  int64_t claimed = 0;
  int active = 0;
  TokenSource tokens;
  std::vector<ContendTask> tasks;
  std::string kSet = "SET", kNx = "NX", kPx = "PX", kGet = "GET", kIncr = "INCR",
              kEvalsha = "EVALSHA", kOne = "1";

  void Next(ContendTask* t) {
    if (claimed >= o->total || !rig->error.ok()) {
      --active;
      return;
    }
    ++claimed;
    t->token = tokens.Next();
    TryAcquire(t);
  }

  void TryAcquire(ContendTask* t) {
    ++t->attempts;
    SendArgv(rig->conns[0], &ContendRunner::OnSet, t,
             {&kSet, &keys->lock, &t->token, &kNx, &kPx, &ttl});
  }

  static bool Check(ContendTask* t, redisReply* reply) {
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      t->r->rig->Fail(reply ? std::string(reply->str, reply->len) : "disconnected");
      --t->r->active;
      return false;
    }
    return true;
  }

  static void OnSet(redisAsyncContext*, void* rv, void* priv) {
    auto* t = static_cast<ContendTask*>(priv);
    auto* reply = static_cast<redisReply*>(rv);
    if (!Check(t, reply)) return;
    ContendRunner* r = t->r;
    if (reply->type != REDIS_REPLY_STATUS) {
      uv_timer_start(
          t->timer,
          [](uv_timer_t* h) {
            auto* task = static_cast<ContendTask*>(h->data);
            task->r->TryAcquire(task);
          },
          r->o->retry_ms, 0);
      return;
    }
    SendArgv(r->rig->conns[0], &ContendRunner::OnGet, t, {&r->kGet, &r->keys->counter});
  }

  static void OnGet(redisAsyncContext* ac, void* rv, void* priv) {
    auto* t = static_cast<ContendTask*>(priv);
    auto* reply = static_cast<redisReply*>(rv);
    if (!Check(t, reply)) return;
    ContendRunner* r = t->r;
    int64_t v = reply->type == REDIS_REPLY_STRING ? std::strtoll(reply->str, nullptr, 10) : 0;
    std::string nv = absl::StrCat(v + 1);
    SendArgv(ac, nullptr, nullptr, {&r->kSet, &r->keys->counter, &nv});
    SendArgv(ac, nullptr, nullptr, {&r->kIncr, &r->keys->incr});
    SendArgv(ac, &ContendRunner::OnRelease, t,
             {&r->kEvalsha, &r->sha, &r->kOne, &r->keys->lock, &t->token});
  }

  static void OnRelease(redisAsyncContext*, void* rv, void* priv) {
    auto* t = static_cast<ContendTask*>(priv);
    auto* reply = static_cast<redisReply*>(rv);
    if (!Check(t, reply)) return;
    ++t->done;
    t->r->Next(t);
  }
};

}  // namespace

absl::StatusOr<BenchResult> RawAsyncContend(const RawOptions& o) {
  if (o.ports.size() != 1) return absl::InvalidArgumentError("raw contend: one server");
  auto sha = LoadScript(o.host, o.ports[0]);
  if (!sha.ok()) return sha.status();
  ContendKeys keys(o.prefix + "async:");
  if (absl::Status s = SyncDel(o.host, o.ports[0], {keys.counter, keys.incr, keys.lock});
      !s.ok())
    return s;
  AsyncRig rig;
  if (absl::Status s = rig.Open(o.host, o.ports); !s.ok()) return s;
  ContendRunner runner;
  runner.rig = &rig;
  runner.o = &o;
  runner.keys = &keys;
  runner.sha = *sha;
  runner.ttl = absl::StrCat(o.ttl_ms);
  runner.tasks.resize(o.workers);
  for (int i = 0; i < o.workers; ++i) {
    ContendTask& t = runner.tasks[i];
    t.r = &runner;
    t.id = i;
    t.timer = new uv_timer_t;
    uv_timer_init(&rig.loop, t.timer);
    t.timer->data = &t;
  }
  Usage before = Usage::Now();
  int64_t t0 = NowNanos();
  runner.active = o.workers;
  for (ContendTask& t : runner.tasks) runner.Next(&t);
  while (runner.active > 0 && rig.error.ok()) uv_run(&rig.loop, UV_RUN_ONCE);
  int64_t t1 = NowNanos();
  Usage after = Usage::Now();
  for (ContendTask& t : runner.tasks) {
    uv_close(reinterpret_cast<uv_handle_t*>(t.timer),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  }
  absl::Status err = rig.error;
  rig.Close();
  if (!err.ok()) return err;
  std::vector<int64_t> per_worker;
  int64_t attempts = 0;
  for (const ContendTask& t : runner.tasks) {
    per_worker.push_back(t.done);
    attempts += t.attempts;
  }
  BenchResult r;
  r.peer = "hiredis-raw";
  r.api = "async";
  r.workload = "contend";
  r.instances = 1;
  r.Set("retry_ms", static_cast<int64_t>(o.retry_ms));
  if (absl::Status s =
          FinishContend(o, keys, per_worker, attempts, t1 - t0, before, after, &r);
      !s.ok())
    return s;
  return r;
}

}  // namespace bench
}  // namespace dlock
