// server_time: the server's own time per acquire+release cycle of each dlock
// policy's scripts, from `INFO commandstats` (issue 23, goal 2).
//
// For each row it resets the server's statistics (CONFIG RESETSTAT), runs N
// sequential cycles over hiredis's synchronous API -- acquire, then release,
// of a fresh resource name each time (as a service locking per order id
// does) -- and divides the `usec` of every command in INFO commandstats by
// N (a script's inner calls count twice there: in their own entry and in
// the EVALSHA's; the last column sums only the commands the client sent,
// EVALSHA and a direct SET, each microsecond once). The baseline row is
// `SET key token NX PX ttl` + a compare-and-delete script (`if GET ==
// token then DEL`), the raw lock dlock is measured against. Server time does not count network or client time, so it is far
// less sensitive to a busy machine than throughput (still: pin the server,
// e.g. `taskset -c 0 redis-server ...`, and compare rows of one run).
//
// Rows: the policies' acquire/release scripts with fencing (every dlock
// acquire fences) and the restart rule off (window 0) and on (window 30 s,
// the data-set marker declared trusted so the window never refuses):
//   simple      AcquireScript + ReleaseScript (SimpleLock, RetryLock, RedLock
//               per server, before the transaction; now: a cluster, replica
//               acknowledgement)
//   simple, transaction   MULTI/SET NX PX GET/INCR/GET marker/[TIME]/EXEC +
//               ReleaseScript (SimpleLock, RetryLock, RedLock per server)
//   writer      WriteAcquireScript + ReleaseScript (ReadWriteLock writer
//               before the transaction; now: a cluster, replica ack)
//   writer, transaction   MULTI/SET NX PX GET/EXISTS readers intent/INCR/
//               GET marker/[TIME]/EXEC + ReleaseScript (ReadWriteLock
//               writer, `dlock run` exclusive)
//   reader      ReadAcquireScript + ReadReleaseScript
//   reentrant   ReentrantAcquireScript + ReentrantReleaseScript
//   semaphore   SemaphoreAcquireScript + SemaphoreReleaseScript (3 permits)
//   fair        FairAcquireScript + FairReleaseScript
//   simple, fencing off   AcquireUnfencedScript + ReleaseScript
//   SET NX PX GET + dlock release   the unfenced acquire as a plain command
//               (no script; no restart rule: both columns run the same)
// KEYS: each script's own (lock, ..., data-set marker, fence mark).
//
//   bazel run -c opt //bench:server_time -- --port 6379 --n 20000 [--only simple ...]
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/semaphore_scripts.h"

namespace {

redisContext* g_ctx = nullptr;

redisReply* Cmd(const std::vector<std::string>& argv) {
  std::vector<const char*> a;
  std::vector<size_t> len;
  for (const std::string& s : argv) {
    a.push_back(s.data());
    len.push_back(s.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(g_ctx, static_cast<int>(a.size()), a.data(), len.data()));
  if (r == nullptr) {
    std::fprintf(stderr, "server_time: connection error: %s\n", g_ctx->errstr);
    std::exit(1);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "server_time: %s: %s\n", argv[0].c_str(), r->str);
    std::exit(1);
  }
  return r;
}

void Run(const std::vector<std::string>& argv) { freeReplyObject(Cmd(argv)); }

std::string Load(const dlock::Script& s) {
  redisReply* r = Cmd({"SCRIPT", "LOAD", s.source()});
  std::string sha(r->str, r->len);
  freeReplyObject(r);
  return sha;
}

int KeyCount(const char* name) {
  for (const auto& list : {dlock::AllScripts(), dlock::FairScripts(), dlock::SemaphoreScripts()}) {
    for (const dlock::NamedScript& s : list) {
      if (std::strcmp(s.name, name) == 0) return s.num_keys;
    }
  }
  std::fprintf(stderr, "server_time: no script %s\n", name);
  std::exit(1);
}

// usec of the named commands only (cmdstat_<name>). A command a script
// calls is counted twice in commandstats: in its own entry and in the
// EVALSHA that called it (Redis 7.0), so TotalUsec counts a script's inner
// calls twice; the sum over the commands the client itself sent (EVALSHA,
// and SET for the rows that send it) counts each microsecond once.
double UsecOf(std::initializer_list<const char*> names) {
  redisReply* r = Cmd({"INFO", "commandstats"});
  std::string info(r->str, r->len);
  freeReplyObject(r);
  double total = 0;
  for (const char* name : names) {
    const std::string tag = std::string("cmdstat_") + name + ":";
    const size_t pos = info.find(tag);
    if (pos == std::string::npos) continue;
    const size_t usec = info.find("usec=", pos);
    if (usec != std::string::npos) total += std::strtod(info.c_str() + usec + 5, nullptr);
  }
  return total;
}

// The first `n` of `keys`.
std::vector<std::string> First(std::vector<std::string> keys, int n) {
  keys.resize(static_cast<size_t>(n));
  return keys;
}

// usec spent in every command since the last CONFIG RESETSTAT.
double TotalUsec() {
  redisReply* r = Cmd({"INFO", "commandstats"});
  std::string info(r->str, r->len);
  freeReplyObject(r);
  double total = 0;
  size_t pos = 0;
  while ((pos = info.find("usec=", pos)) != std::string::npos) {
    pos += 5;
    total += std::strtod(info.c_str() + pos, nullptr);
  }
  return total;
}

// Commands the server ran since the last CONFIG RESETSTAT other than the
// script calls themselves (EVALSHA) and CONFIG: the calls inside scripts
// plus SET for the baseline. Independent of load.
double InnerCalls() {
  redisReply* r = Cmd({"INFO", "commandstats"});
  std::string info(r->str, r->len);
  freeReplyObject(r);
  double total = 0;
  size_t pos = 0;
  while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
    const size_t colon = info.find(':', pos);
    const std::string name = info.substr(pos + 8, colon - pos - 8);
    const size_t calls = info.find("calls=", colon);
    if (name != "evalsha" && name != "config" && name != "info") {
      total += std::strtod(info.c_str() + calls + 6, nullptr);
    }
    pos = colon;
  }
  return total;
}

// The server main thread's CPU time so far (user + sys, us), from INFO cpu:
// unlike commandstats' wall-clock usec it does not grow while the server is
// preempted, but it also counts reading and writing the commands.
double MainThreadCpuUsec() {
  redisReply* r = Cmd({"INFO", "cpu"});
  std::string info(r->str, r->len);
  freeReplyObject(r);
  double total = 0;
  for (const char* field : {"used_cpu_user_main_thread:", "used_cpu_sys_main_thread:"}) {
    const size_t pos = info.find(field);
    if (pos != std::string::npos) total += std::strtod(info.c_str() + pos + std::strlen(field), nullptr);
  }
  return total * 1e6;
}

struct Policy {
  const char* name;
  // Runs one acquire + release of resource `r` (must succeed).
  void (*cycle)(const std::string& r, const std::string& window);
  // Whether the row sends SET itself (not from a script).
  bool sends_set = false;
  // Whether the row sends MULTI/EXEC (its commands counted in EXEC's usec).
  bool sends_tx = false;
};

std::string g_sha[16];
enum {
  kAcquire, kRelease, kWrite, kRead, kReadRelease, kReentrant, kReentrantRelease,
  kSemAcquire, kSemRelease, kFairAcquire, kFairRelease, kCad, kUnfenced
};

int64_t Integer(const std::vector<std::string>& argv, const char* what) {
  redisReply* r = Cmd(argv);
  int64_t v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) v = r->element[1]->integer;  // reentrant
  freeReplyObject(r);
  if (v < 0) {
    std::fprintf(stderr, "server_time: %s was not granted\n", what);
    std::exit(1);
  }
  return v;
}

std::string Lk(const std::string& r) { return "dlock:{" + r + "}"; }

void Simple(const std::string& r, const std::string& window) {
  std::vector<std::string> a = {"EVALSHA", g_sha[kAcquire], std::to_string(KeyCount("acquire"))};
  for (auto& k : First({Lk(r), "dlock:data-set-began", "dlock:fence-hwm"},
                       KeyCount("acquire")))
    a.push_back(k);
  a.insert(a.end(), {"tok", "30000", window});
  Integer(a, "acquire");
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

// Sends `cmds` (MULTI, ..., EXEC) written at once (pipelined), as the
// transports send a transaction, and checks EXEC's reply: SET (the first
// queued command) set the key, every INTEGER reply at the queued positions
// `zero` is 0 and the INCR at `incr` answered > 0 (the common path: the
// rare-path script never runs).
void SendTx(const std::vector<std::vector<std::string>>& cmds, size_t incr,
            std::initializer_list<size_t> zero, const char* what) {
  for (const std::vector<std::string>& argv : cmds) {
    std::vector<const char*> a;
    std::vector<size_t> len;
    for (const std::string& x : argv) {
      a.push_back(x.data());
      len.push_back(x.size());
    }
    redisAppendCommandArgv(g_ctx, static_cast<int>(a.size()), a.data(), len.data());
  }
  bool ok = true;
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(g_ctx, &raw) != REDIS_OK || raw == nullptr) {
      std::fprintf(stderr, "server_time: connection lost\n");
      std::exit(1);
    }
    auto* reply = static_cast<redisReply*>(raw);
    if (i + 1 == cmds.size()) {
      ok = reply->type == REDIS_REPLY_ARRAY && reply->elements == cmds.size() - 2 &&
           reply->element[0]->type == REDIS_REPLY_NIL &&
           reply->element[incr]->type == REDIS_REPLY_INTEGER && reply->element[incr]->integer > 0;
      for (size_t z : zero) {
        ok = ok && reply->element[z]->type == REDIS_REPLY_INTEGER && reply->element[z]->integer == 0;
      }
    }
    freeReplyObject(reply);
  }
  if (!ok) {
    std::fprintf(stderr, "server_time: %s was not granted on its common path\n", what);
    std::exit(1);
  }
}

// The fenced acquire as SimpleLock sends it on its common path
// (lock/lease_command.h, SendFencedAcquireTx): MULTI / SET NX PX GET / INCR
// mark / GET marker / [TIME with a window] / EXEC, written at once
// (pipelined), + ReleaseScript. The marker is trusted, so the fence is
// valid as it is and the rare path (AcquireAfterTxScript) never runs.
// EXEC's usec includes its queued commands (checked on 7.0.15 with a queued
// DEBUG SLEEP), so the sent-commands column counts MULTI and EXEC.
void SimpleTx(const std::string& r, const std::string& window) {
  std::vector<std::vector<std::string>> cmds = {
      {"MULTI"},
      {"SET", Lk(r), "tok", "NX", "PX", "30000", "GET"},
      {"INCR", "dlock:fence-hwm"},
      {"GET", "dlock:data-set-began"}};
  if (window != "0") cmds.push_back({"TIME"});
  cmds.push_back({"EXEC"});
  SendTx(cmds, 1, {}, "the transaction's acquire");
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

// The read-write lock's writer as `dlock run` (exclusive) sends it on its
// common path (lock/write_acquire_tx.h): MULTI / SET NX PX GET / EXISTS
// readers intent / INCR mark / GET marker / [TIME] / EXEC, pipelined, +
// ReleaseScript (the writer's release is the plain lock's). No readers and
// no intent: the rare path (WriteAfterTxScript) never runs.
void WriterTx(const std::string& r, const std::string& window) {
  std::vector<std::vector<std::string>> cmds = {
      {"MULTI"},
      {"SET", Lk(r), "tok", "NX", "PX", "30000", "GET"},
      {"EXISTS", Lk(r) + ":readers", Lk(r) + ":writer-waiting"},
      {"INCR", "dlock:fence-hwm"},
      {"GET", "dlock:data-set-began"}};
  if (window != "0") cmds.push_back({"TIME"});
  cmds.push_back({"EXEC"});
  SendTx(cmds, 2, {1}, "the writer's transaction");
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

// Fencing off (SimpleLockOptions::fencing = false): AcquireUnfencedScript
// (KEYS: lock, and the marker only with a window) + ReleaseScript.
void Unfenced(const std::string& r, const std::string& window) {
  const bool on = window != "0";
  std::vector<std::string> a = {"EVALSHA", g_sha[kUnfenced], on ? "2" : "1", Lk(r)};
  if (on) a.push_back("dlock:data-set-began");
  a.insert(a.end(), {"tok", "30000", window});
  redisReply* reply = Cmd(a);
  const bool ok = reply->type == REDIS_REPLY_INTEGER && reply->integer == 0;
  freeReplyObject(reply);
  if (!ok) {
    std::fprintf(stderr, "server_time: unfenced acquire was not granted\n");
    std::exit(1);
  }
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

// What the unfenced acquire with the window off would be as a plain command
// instead of a script: SET NX PX GET (nil: granted) + ReleaseScript. The
// window column runs the same (a plain command cannot apply the rule).
void PlainSetGet(const std::string& r, const std::string&) {
  redisReply* s = Cmd({"SET", Lk(r), "tok", "NX", "PX", "30000", "GET"});
  const bool ok = s->type == REDIS_REPLY_NIL;
  freeReplyObject(s);
  if (!ok) {
    std::fprintf(stderr, "server_time: SET NX PX GET refused\n");
    std::exit(1);
  }
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

void Writer(const std::string& r, const std::string& window) {
  const int n = KeyCount("write_acquire");
  std::vector<std::string> a = {"EVALSHA", g_sha[kWrite], std::to_string(n)};
  for (auto& k : First({Lk(r), Lk(r) + ":readers", Lk(r) + ":writer-waiting",
                        "dlock:data-set-began", "dlock:fence-hwm"},
                       n))
    a.push_back(k);
  a.insert(a.end(), {"tok", "30000", window, "0"});
  Integer(a, "write acquire");
  Run({"EVALSHA", g_sha[kRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

void Reader(const std::string& r, const std::string& window) {
  const int n = KeyCount("read_acquire");
  std::vector<std::string> a = {"EVALSHA", g_sha[kRead], std::to_string(n)};
  for (auto& k : First({Lk(r), Lk(r) + ":readers", Lk(r) + ":writer-waiting",
                        "dlock:data-set-began", "dlock:fence-hwm"},
                       n))
    a.push_back(k);
  a.insert(a.end(), {"tok", "30000", window});
  Integer(a, "read acquire");
  Run({"EVALSHA", g_sha[kReadRelease], "1", Lk(r) + ":readers", "tok", Lk(r) + ":released"});
}

void Reentrant(const std::string& r, const std::string& window) {
  const int n = KeyCount("reentrant_acquire");
  std::vector<std::string> a = {"EVALSHA", g_sha[kReentrant], std::to_string(n)};
  for (auto& k : First({Lk(r), Lk(r) + ":acquire:1", "dlock:data-set-began",
                        "dlock:fence-hwm"},
                       n))
    a.push_back(k);
  a.insert(a.end(), {"c:t", "30000", window});
  Integer(a, "reentrant acquire");
  Run({"EVALSHA", g_sha[kReentrantRelease], "1", Lk(r), "c:t", Lk(r) + ":released"});
}

void Sem(const std::string& r, const std::string& window) {
  const int n = KeyCount("semaphore_acquire");
  std::vector<std::string> a = {"EVALSHA", g_sha[kSemAcquire], std::to_string(n)};
  for (auto& k : First({Lk(r), "dlock:data-set-began", "dlock:fence-hwm"}, n))
    a.push_back(k);
  a.insert(a.end(), {"tok", "30000", window, "3"});
  Integer(a, "semaphore acquire");
  Run({"EVALSHA", g_sha[kSemRelease], "1", Lk(r), "tok", Lk(r) + ":released"});
}

void Fair(const std::string& r, const std::string& window) {
  const int n = KeyCount("fair_acquire");
  std::vector<std::string> a = {"EVALSHA", g_sha[kFairAcquire], std::to_string(n)};
  for (auto& k : First({Lk(r), "dlock:data-set-began", Lk(r) + ":queue",
                        "dlock:fence-hwm"},
                       n))
    a.push_back(k);
  a.insert(a.end(), {"tok", "30000", window, "i:1", "10000", "dlock:waiter:"});
  Integer(a, "fair acquire");
  Run({"EVALSHA", g_sha[kFairRelease], "2", Lk(r), Lk(r) + ":queue", "tok", "i:1",
       "dlock:waiter:"});
}

void Baseline(const std::string& r, const std::string&) {
  redisReply* s = Cmd({"SET", Lk(r), "tok", "NX", "PX", "30000"});
  const bool ok = s->type == REDIS_REPLY_STATUS;
  freeReplyObject(s);
  if (!ok) {
    std::fprintf(stderr, "server_time: SET NX refused\n");
    std::exit(1);
  }
  Run({"EVALSHA", g_sha[kCad], "1", Lk(r), "tok"});
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 6379, n = 20000;
  std::vector<std::string> only;  // --only ROW (repeatable): the baseline and those rows
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--host") host = argv[i + 1];
    if (f == "--port") port = std::atoi(argv[i + 1]);
    if (f == "--n") n = std::atoi(argv[i + 1]);
    if (f == "--only") only.push_back(argv[i + 1]);
  }
  g_ctx = redisConnect(host.c_str(), port);
  if (g_ctx == nullptr || g_ctx->err) {
    std::fprintf(stderr, "server_time: cannot connect to %s:%d\n", host.c_str(), port);
    return 1;
  }
  Run({"FLUSHALL"});
  g_sha[kAcquire] = Load(dlock::AcquireScript());
  g_sha[kRelease] = Load(dlock::ReleaseScript());
  g_sha[kWrite] = Load(dlock::WriteAcquireScript());
  g_sha[kRead] = Load(dlock::ReadAcquireScript());
  g_sha[kReadRelease] = Load(dlock::ReadReleaseScript());
  g_sha[kReentrant] = Load(dlock::ReentrantAcquireScript());
  g_sha[kReentrantRelease] = Load(dlock::ReentrantReleaseScript());
  g_sha[kSemAcquire] = Load(dlock::SemaphoreAcquireScript());
  g_sha[kSemRelease] = Load(dlock::SemaphoreReleaseScript());
  g_sha[kFairAcquire] = Load(dlock::FairAcquireScript());
  g_sha[kFairRelease] = Load(dlock::FairReleaseScript());
  g_sha[kUnfenced] = Load(dlock::AcquireUnfencedScript());
  {
    redisReply* r = Cmd({"SCRIPT", "LOAD",
                         "if redis.call('get', KEYS[1]) == ARGV[1] then "
                         "return redis.call('del', KEYS[1]) end return 0"});
    g_sha[kCad].assign(r->str, r->len);
    freeReplyObject(r);
  }
  const Policy policies[] = {{"SET NX PX + compare-and-delete", Baseline, true},
                             {"simple", Simple},
                             {"simple, transaction", SimpleTx, false, true},
                             {"writer", Writer},
                             {"writer, transaction", WriterTx, false, true},
                             {"reader", Reader},
                             {"reentrant", Reentrant},
                             {"semaphore", Sem},
                             {"fair", Fair},
                             {"simple, fencing off", Unfenced},
                             {"SET NX PX GET + dlock release", PlainSetGet, true}};
  double base = 0, top_base = 0;
  std::printf("%-32s %10s %10s %8s %8s   %10s %10s   %-10s   %s\n",
              "row: usec/cycle (commandstats)", "window 0", "window on", "x base", "x base",
              "cpu w0", "cpu on", "cmds w0,on", "sent-commands usec w0, on (x base)");
  for (const Policy& p : policies) {
    if (!only.empty() && p.cycle != Baseline &&
        std::find(only.begin(), only.end(), p.name) == only.end()) {
      continue;
    }
    double us[2] = {0, 0}, cpu[2] = {0, 0}, calls[2] = {0, 0}, top[2] = {0, 0};
    for (int w = 0; w < 2; ++w) {
      Run({"FLUSHALL"});
      Run({"SET", "dlock:data-set-began", "0"});  // trusted: the window never refuses
      const std::string window = w == 0 ? "0" : "30000";
      for (int i = 0; i < 200; ++i) p.cycle("warm:" + std::to_string(i), window);
      Run({"CONFIG", "RESETSTAT"});
      const double cpu0 = MainThreadCpuUsec();
      for (int i = 0; i < n; ++i) p.cycle("order:" + std::to_string(i), window);
      cpu[w] = (MainThreadCpuUsec() - cpu0) / n;
      calls[w] = InnerCalls() / n;
      top[w] = (p.sends_set  ? UsecOf({"evalsha", "set"})
                : p.sends_tx ? UsecOf({"evalsha", "multi", "exec"})
                             : UsecOf({"evalsha"})) /
               n;
      double total = TotalUsec();
      // CONFIG RESETSTAT itself is not counted; INFO is counted after the read.
      us[w] = total / n;
    }
    if (base == 0) base = us[0];
    if (top_base == 0) top_base = top[0];
    std::printf(
        "%-32s %8.2f us %8.2f us %7.2fx %7.2fx   %7.2f us %7.2f us   %4.1f, %4.1f   %6.2f, %6.2f us "
        "(%.2fx, %.2fx)\n",
        p.name, us[0], us[1], us[0] / base, us[1] / base, cpu[0], cpu[1], calls[0], calls[1],
        top[0], top[1], top[0] / top_base, top[1] / top_base);
  }
  redisFree(g_ctx);
  return 0;
}
