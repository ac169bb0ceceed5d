#include "dlock/tests/torture/torture_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/tests/torture/worker_processes.h"

namespace dlock {
namespace torture {

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kPauseHolder: return "SIGSTOP holder > TTL";
    case Fault::kKillRestart: return "kill -9 + restart server";
    case Fault::kKillMinority: return "kill -9 + restart 1 of N";
    case Fault::kPauseMinority: return "SIGSTOP 1 of N > TTL";
    case Fault::kFailover: return "SENTINEL FAILOVER";
    case Fault::kKillMaster: return "kill -9 master (Sentinel fails over)";
  }
  return "?";
}

namespace {

using test_support::RedisServer;
using test_support::RedisServerOptions;

constexpr int kMaxWorkers = 64;

absl::Status ParseLog(const std::string& path, int worker, std::vector<CsRecord>* out,
                      int64_t* acquire_errors) {
  std::ifstream in(path);
  if (!in) return absl::InternalError(absl::StrCat("no worker log ", path));
  std::string line;
  while (std::getline(in, line)) {
    CsRecord r;
    r.worker = worker;
    long long fence, start, end;
    int outcome;
    long long acq, errs;
    if (std::sscanf(line.c_str(), "cs %lld %lld %lld %d", &fence, &start, &end, &outcome) == 4) {
      r.fence = fence;
      r.start_ns = start;
      r.end_ns = end;
      r.outcome = static_cast<CsOutcome>(outcome);
      out->push_back(r);
    } else if (std::sscanf(line.c_str(), "done %lld %lld", &acq, &errs) == 2) {
      *acquire_errors += errs;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScenarioResult> RunScenario(const ScenarioSpec& spec,
                                           const std::string& worker_path) {
  static_assert(kMaxWorkers <= kWrittenSlotBase, "shared page layout");
  if (!spec.primitive.empty() && (spec.lock_servers != 1 || spec.sentinel)) {
    return absl::InvalidArgumentError("primitive scenarios run on one plain lock server");
  }
  if (spec.workers <= 0 || spec.workers > kMaxWorkers || spec.lock_servers <= 0) {
    return absl::InvalidArgumentError("bad worker or server count");
  }
  std::string dir = TempRoot();
  if (dir.empty()) return absl::InternalError("mkdtemp failed");

  RedisServerOptions lock_opts;
  lock_opts.appendonly = spec.persistence;
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::unique_ptr<test_support::SentinelDeployment> sentinel;
  if (spec.sentinel) {
    auto d = test_support::SentinelDeployment::Start({});
    if (!d.ok()) return d.status();
    sentinel = *std::move(d);
  }
  for (int i = 0; i < (spec.sentinel ? 0 : spec.lock_servers); ++i) {
    auto s = RedisServer::Start(lock_opts);
    if (!s.ok()) return s.status();
    servers.push_back(*std::move(s));
  }
  auto store_or = RedisServer::Start({});
  if (!store_or.ok()) return store_or.status();
  std::unique_ptr<RedisServer> store = *std::move(store_or);

  SharedFlags flags;
  std::string shm = dir + "/in_cs";
  if (absl::Status s = flags.Create(shm); !s.ok()) return s;

  std::vector<std::string> ports;
  for (auto& s : servers) ports.push_back(absl::StrCat(s->port()));
  // "rw": at least one writer, whatever the worker count.
  const int readers = std::min(spec.readers, spec.workers - 1);
  std::vector<WorkerProcess> workers(spec.workers);
  for (int i = 0; i < spec.workers; ++i) {
    workers[i].log = absl::StrCat(dir, "/worker", i, ".log");
    std::vector<std::string> args = {
        absl::StrCat("--id=", i),
        spec.sentinel ? absl::StrCat("--lock_url=", sentinel->url())
                      : absl::StrCat("--lock_ports=", absl::StrJoin(ports, ",")),
        absl::StrCat("--min_replicas=", spec.min_replicas),
        absl::StrCat("--store_port=", store->port()),
        absl::StrCat("--ttl_ms=", absl::ToInt64Milliseconds(spec.ttl)),
        absl::StrCat("--hold_ms=", absl::ToInt64Milliseconds(spec.hold)),
        absl::StrCat("--redlock_max_ttl_ms=", absl::ToInt64Milliseconds(spec.redlock_max_ttl)),
        absl::StrCat("--redlock_delayed_restart=", spec.redlock_delayed_restart ? "true" : "false"),
        absl::StrCat("--single_restart_window_ms=",
                     absl::ToInt64Milliseconds(spec.single_restart_window)),
        absl::StrCat("--check_deadline=", spec.check_deadline ? "true" : "false"),
        absl::StrCat("--primitive=",
                     spec.primitive == "rw" ? (i < readers ? "reader" : "writer")
                                            : spec.primitive),
        absl::StrCat("--permits=", spec.permits),
        absl::StrCat("--log=", workers[i].log),
        absl::StrCat("--shm=", shm),
    };
    if (absl::Status s = SpawnWorker(worker_path, args, absl::StrCat(dir, "/worker", i, ".err"),
                               &workers[i]);
        !s.ok()) {
      for (auto& w : workers) StopWorker(&w);
      return s;
    }
  }

  // The nemesis.
  ScenarioResult result;
  result.spec = spec;
  absl::Time start = absl::Now();
  absl::Time end = start + spec.duration;
  absl::Time next_fault = start + std::min(spec.fault_every, spec.duration / 4);
  int rotate = 0;
  absl::Status nemesis_error;
  while (absl::Now() < end && nemesis_error.ok()) {
    if (spec.fault == Fault::kNone || absl::Now() < next_fault) {
      absl::SleepFor(absl::Milliseconds(5));
      continue;
    }
    switch (spec.fault) {
      case Fault::kNone:
        break;
      case Fault::kPauseHolder: {
        // Catch a worker inside its critical section.
        bool caught = false;
        for (int tries = 0; tries < 2000 && !caught && absl::Now() < end; ++tries) {
          for (int i = 0; i < spec.workers && !caught; ++i) {
            int k = (rotate + i) % spec.workers;
            const int32_t before_write =
                static_cast<int32_t>(TortureClient::Phase::kBeforeWrite);
            if (workers[k].exited || flags.slots[k].load() != before_write) continue;
            // Land anywhere in the critical section, not just at its start.
            absl::SleepFor(spec.hold * (rotate % 4) / 4);
            kill(workers[k].pid, SIGSTOP);
            if (!WaitStopped(&workers[k])) continue;
            if (flags.slots[k].load() == before_write) {
              caught = true;
              ++result.faults_injected;
              // Past the TTL, and until another holder's fenced write was
              // accepted (bounded): then the paused holder's own read or
              // write is certain to carry a stale fence.
              auto others_written = [&] {
                int64_t n = 0;
                for (int j = 0; j < spec.workers; ++j) {
                  if (j != k) n += flags.slots[kWrittenSlotBase + j].load();
                }
                return n;
              };
              const int64_t written_before = others_written();
              absl::SleepFor(spec.pause_for);
              const absl::Time give_up = absl::Now() + absl::Seconds(10);
              while (others_written() == written_before && absl::Now() < give_up) {
                absl::SleepFor(absl::Milliseconds(5));
              }
              if (others_written() > written_before) ++result.stale_expected;
            }
            kill(workers[k].pid, SIGCONT);
          }
          if (!caught) absl::SleepFor(absl::Microseconds(200));
        }
        ++rotate;
        break;
      }
      case Fault::kKillRestart:
      case Fault::kKillMinority: {
        RedisServer& s = *servers[rotate++ % servers.size()];
        if (absl::Status st = s.Kill(); !st.ok()) nemesis_error = st;
        if (absl::Status st = s.Restart(); !st.ok()) nemesis_error = st;
        ++result.faults_injected;
        break;
      }
      case Fault::kFailover: {
        if (absl::Status st = sentinel->Failover(); !st.ok()) nemesis_error = st;
        ++result.faults_injected;
        break;
      }
      case Fault::kKillMaster: {
        absl::StatusOr<int> master = sentinel->MasterIndex();
        if (!master.ok()) {
          nemesis_error = master.status();
          break;
        }
        RedisServer& s = sentinel->data(*master);
        if (absl::Status st = s.Kill(); !st.ok()) nemesis_error = st;
        ++result.faults_injected;
        absl::StatusOr<int> promoted = sentinel->WaitForNewMaster(*master);
        if (!promoted.ok()) nemesis_error = promoted.status();
        if (absl::Status st = s.Restart(); !st.ok()) nemesis_error = st;
        break;
      }
      case Fault::kPauseMinority: {
        RedisServer& s = *servers[rotate++ % servers.size()];
        if (absl::Status st = s.Pause(); !st.ok()) nemesis_error = st;
        ++result.faults_injected;
        absl::SleepFor(spec.pause_for);
        if (absl::Status st = s.Resume(); !st.ok()) nemesis_error = st;
        break;
      }
    }
    next_fault = absl::Now() + spec.fault_every;
  }
  for (auto& w : workers) StopWorker(&w);
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!nemesis_error.ok()) return nemesis_error;

  std::vector<CsRecord> records;
  for (int i = 0; i < spec.workers; ++i) {
    const WorkerProcess& w = workers[i];
    if (absl::Status s = CheckWorkerExit(w, absl::StrCat(i)); !s.ok()) return s;
    if (absl::Status s = ParseLog(w.log, i, &records, &result.acquire_errors); !s.ok()) return s;
  }
  absl::StatusOr<Reply> mget = store->Command(ReadCountersCommand());
  if (!mget.ok()) return mget.status();
  absl::StatusOr<Counters> c = ParseCounters(*mget);
  if (!c.ok()) return c.status();
  result.rw = CountReadWriteOverlaps(
      records, [&spec, readers](int worker) { return spec.primitive == "rw" && worker < readers; });
  result.max_concurrent = MaxConcurrent(records);
  result.report = CheckRecords(std::move(records), *c);
  return result;
}

std::vector<ScenarioSpec> StandardScenarios(absl::Duration total) {
  std::vector<ScenarioSpec> v;
  auto add = [&](std::string name, int servers, bool persist, Fault f) {
    ScenarioSpec s;
    s.name = std::move(name);
    s.lock_servers = servers;
    s.persistence = persist;
    s.fault = f;
    if (f == Fault::kKillMinority) s.fault_every = absl::Seconds(3);  // > max_ttl
    if (f == Fault::kPauseHolder) s.check_deadline = false;
    // Kill+restart: a critical section longer than a restart, so the
    // server can come back (empty, without persistence) while a holder is
    // still inside.
    if (f == Fault::kKillRestart) s.hold = absl::Milliseconds(200);
    v.push_back(s);
  };
  add("single, no fault", 1, false, Fault::kNone);
  add("single, SIGSTOP holder", 1, false, Fault::kPauseHolder);
  add("single, kill+restart, no persistence", 1, false, Fault::kKillRestart);
  add("single, kill+restart, AOF fsync always", 1, true, Fault::kKillRestart);
  // SimpleLock's restart window (2 s > the 500 ms TTL): the restarted,
  // empty server grants nothing until every lease it lost has expired.
  add("single, kill+restart, no persistence, restart window 2 s", 1, false,
      Fault::kKillRestart);
  v.back().single_restart_window = absl::Seconds(2);
  v.back().fault_every = absl::Seconds(3);
  add("redlock 3, SIGSTOP holder", 3, false, Fault::kPauseHolder);
  add("redlock 3, kill+restart minority", 3, false, Fault::kKillMinority);
  add("redlock 3, SIGSTOP minority", 3, false, Fault::kPauseMinority);
  // Issue 16's shared primitives (TTL far above a critical section: the
  // invariants hold by design only while no lease expires unnoticed).
  add("single, read-write lock (2 readers), no fault", 1, false, Fault::kNone);
  v.back().primitive = "rw";
  v.back().readers = 2;
  v.back().ttl = absl::Seconds(10);
  add("single, semaphore of 2, no fault", 1, false, Fault::kNone);
  v.back().primitive = "semaphore";
  v.back().permits = 2;
  v.back().ttl = absl::Seconds(10);
  absl::Duration each = std::max(absl::Seconds(3), total / static_cast<int64_t>(v.size()));
  for (auto& s : v) s.duration = each;
  return v;
}

std::vector<ScenarioSpec> SentinelScenarios(absl::Duration total) {
  std::vector<ScenarioSpec> v;
  for (Fault f : {Fault::kFailover, Fault::kKillMaster}) {
    for (int min_replicas : {0, 2}) {
      ScenarioSpec s;
      s.name = absl::StrCat("sentinel, ", f == Fault::kFailover ? "failover" : "kill -9 master",
                            min_replicas == 0 ? ", no replica ack"
                                              : absl::StrCat(", min-replicas ", min_replicas));
      s.sentinel = true;
      s.min_replicas = min_replicas;
      s.fault = f;
      s.ttl = absl::Seconds(3);  // outlives a failover, so a lost lease shows
      s.hold = absl::Milliseconds(100);
      s.fault_every = absl::Seconds(12);  // time for the old master to rejoin
      v.push_back(s);
    }
  }
  absl::Duration each = std::max(absl::Seconds(15), total / static_cast<int64_t>(v.size()));
  for (auto& s : v) s.duration = each;
  return v;
}

std::string FormatTable(const std::vector<ScenarioResult>& results) {
  std::string out =
      "| scenario | fault | faults injected | CS granted | CS completed (fenced write accepted) "
      "| overlapping holder pairs | stale rejected by fencing | expired locally | store errors "
      "| lost updates (fenced) | lost updates (unfenced twin) | primitive invariant |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const Report& p = r.report;
    std::string invariant = "-";
    if (r.spec.primitive == "rw") {
      invariant = absl::StrFormat("reader/writer overlaps %d, writer/writer %d",
                                  r.rw.reader_writer, r.rw.writer_writer);
    } else if (r.spec.primitive == "semaphore") {
      invariant = absl::StrFormat("at most %d of %d permits held", r.max_concurrent,
                                  r.spec.permits);
    }
    absl::StrAppendFormat(&out, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
                          r.spec.name, FaultName(r.spec.fault), r.faults_injected,
                          p.cs_attempted, p.cs_completed, p.overlaps, p.stale_rejected,
                          p.expired_locally, p.store_errors, p.lost_fenced, p.lost_unfenced,
                          invariant);
  }
  return out;
}

}  // namespace torture
}  // namespace dlock
