#include "dlock/tests/torture/primitive_driver.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/tests/torture/worker_processes.h"

namespace dlock {
namespace torture {

const char* NemesisName(Nemesis n) {
  switch (n) {
    case Nemesis::kPauseHolder: return "SIGSTOP holder";
    case Nemesis::kPauseWaiter: return "SIGSTOP waiter";
    case Nemesis::kKillHolder: return "kill -9 holder";
    case Nemesis::kKillWaiter: return "kill -9 waiter";
    case Nemesis::kRestartServer: return "kill -9 + restart server";
  }
  return "?";
}

namespace {

using test_support::RedisServer;
using test_support::RedisServerOptions;

constexpr int kMaxWorkers = 64;
constexpr int32_t kWaiting = 1;  // primitive_worker's phases
constexpr int32_t kHolding = 2;

// One process in a worker slot; a killed one is followed by a fresh one.
struct Incarnation {
  WorkerProcess process;
  int64_t died_ns = -1;  // killed by the nemesis
};

absl::Status Validate(const PrimitiveSpec& s) {
  if (s.kind != "rw" && s.kind != "semaphore" && s.kind != "fair" && s.kind != "multi") {
    return absl::InvalidArgumentError(absl::StrCat("unknown primitive kind \"", s.kind, "\""));
  }
  if (s.workers < 2 || s.workers > kMaxWorkers) {
    return absl::InvalidArgumentError("workers must be in [2, 64]");
  }
  if (s.kind == "rw" && (s.readers < 1 || s.readers >= s.workers)) {
    return absl::InvalidArgumentError("rw needs at least one reader and one writer");
  }
  if (s.kind == "semaphore" && s.permits < 1) {
    return absl::InvalidArgumentError("permits must be >= 1");
  }
  if (s.kind == "multi" && (s.set_size < 1 || s.set_size > s.pool)) {
    return absl::InvalidArgumentError("multi needs 1 <= set_size <= pool");
  }
  if (s.ttl < absl::Milliseconds(10) || s.hold <= absl::ZeroDuration() ||
      s.duration <= absl::ZeroDuration() || s.fault_every <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ttl, hold, duration and fault_every must be positive");
  }
  return absl::OkStatus();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<PrimitiveResult> RunPrimitiveScenario(const PrimitiveSpec& spec,
                                                     const std::string& worker_path) {
  if (absl::Status s = Validate(spec); !s.ok()) return s;
  const std::string dir = TempRoot();
  if (dir.empty()) return absl::InternalError("mkdtemp failed");
  RedisServerOptions so;
  so.appendonly = spec.persistence;
  auto server_or = RedisServer::Start(so);
  if (!server_or.ok()) return server_or.status();
  std::unique_ptr<RedisServer> server = *std::move(server_or);
  SharedFlags flags;
  const std::string shm = dir + "/phase";
  if (absl::Status s = flags.Create(shm); !s.ok()) return s;

  auto resources_of = [&spec](int i) {
    std::vector<int> r;
    if (spec.kind != "multi") return std::vector<int>{0};
    for (int k = 0; k < spec.set_size; ++k) r.push_back((i + k) % spec.pool);
    return r;
  };
  auto primitive_of = [&spec](int i) -> std::string {
    if (spec.kind == "rw") return i < spec.readers ? "reader" : "writer";
    return spec.kind;
  };
  std::vector<std::vector<Incarnation>> slots(spec.workers);
  auto spawn = [&](int i) -> absl::Status {
    const int gen = static_cast<int>(slots[i].size());
    slots[i].emplace_back();
    Incarnation& inc = slots[i].back();
    inc.process.log = absl::StrCat(dir, "/worker", i, ".", gen, ".log");
    flags.slots[i].store(0);
    std::vector<std::string> args = {
        absl::StrCat("--id=", i),
        absl::StrCat("--lock_port=", server->port()),
        absl::StrCat("--primitive=", primitive_of(i)),
        absl::StrCat("--permits=", spec.permits),
        absl::StrCat("--resources=", absl::StrJoin(resources_of(i), ",")),
        absl::StrCat("--ttl_ms=", absl::ToInt64Milliseconds(spec.ttl)),
        absl::StrCat("--hold_ms=", absl::ToInt64Milliseconds(spec.hold)),
        absl::StrCat("--wait_ms=", absl::ToInt64Milliseconds(spec.wait)),
        absl::StrCat("--queue_ttl_ms=", absl::ToInt64Milliseconds(spec.queue_ttl)),
        absl::StrCat("--restart_window_ms=", absl::ToInt64Milliseconds(spec.restart_window)),
        absl::StrCat("--log=", inc.process.log),
        absl::StrCat("--shm=", shm),
    };
    return SpawnWorker(worker_path, args, absl::StrCat(dir, "/worker", i, ".", gen, ".err"),
                       &inc.process);
  };
  auto stop_all = [&] {
    for (auto& s : slots) {
      if (!s.empty()) StopWorker(&s.back().process);
    }
  };
  for (int i = 0; i < spec.workers; ++i) {
    if (absl::Status s = spawn(i); !s.ok()) {
      stop_all();
      return s;
    }
  }

  // The nemesis.
  PrimitiveResult result;
  result.spec = spec;
  std::vector<FaultWindow> faults;
  const absl::Time start = absl::Now();
  const absl::Time end = start + spec.duration;
  absl::Time next_fault = start + std::min(spec.fault_every, spec.duration / 4);
  size_t turn = 0;
  int rotate = 0;
  absl::Status nemesis_error;
  // A live worker in `phase`, looking for up to a second; -1 if none.
  auto find_in = [&](int32_t phase) {
    const absl::Time give_up = std::min(end, absl::Now() + absl::Seconds(1));
    while (absl::Now() < give_up) {
      for (int k = 0; k < spec.workers; ++k) {
        const int i = (rotate + k) % spec.workers;
        if (!slots[i].back().process.exited && flags.slots[i].load() == phase) return i;
      }
      absl::SleepFor(absl::Microseconds(500));
    }
    return -1;
  };
  while (absl::Now() < end && nemesis_error.ok()) {
    if (spec.faults.empty() || absl::Now() < next_fault) {
      absl::SleepFor(absl::Milliseconds(5));
      continue;
    }
    const Nemesis n = spec.faults[turn++ % spec.faults.size()];
    ++rotate;
    switch (n) {
      case Nemesis::kPauseHolder:
      case Nemesis::kPauseWaiter: {
        const int32_t phase = n == Nemesis::kPauseHolder ? kHolding : kWaiting;
        const int i = find_in(phase);
        if (i < 0) break;
        WorkerProcess& w = slots[i].back().process;
        FaultWindow f;
        f.kind = FaultWindow::kPause;
        f.worker = i;
        f.incarnation = static_cast<int>(slots[i].size()) - 1;
        f.start_ns = MonotonicNanos();
        kill(w.pid, SIGSTOP);
        if (!WaitStopped(&w)) break;  // it exited: reported at the end
        // Count it as caught only if it was still where we looked.
        if (flags.slots[i].load() == phase) {
          ++(n == Nemesis::kPauseHolder ? result.holder_pauses : result.waiter_pauses);
        }
        absl::SleepFor(spec.pause_for);
        kill(w.pid, SIGCONT);
        f.end_ns = MonotonicNanos();
        faults.push_back(f);
        break;
      }
      case Nemesis::kKillHolder:
      case Nemesis::kKillWaiter: {
        const int i = find_in(n == Nemesis::kKillHolder ? kHolding : kWaiting);
        if (i < 0) break;
        Incarnation& inc = slots[i].back();
        FaultWindow f;
        f.kind = FaultWindow::kKill;
        f.worker = i;
        f.incarnation = static_cast<int>(slots[i].size()) - 1;
        f.start_ns = MonotonicNanos();
        KillWorker(&inc.process);
        inc.died_ns = f.end_ns = MonotonicNanos();
        faults.push_back(f);
        ++(n == Nemesis::kKillHolder ? result.holder_kills : result.waiter_kills);
        nemesis_error = spawn(i);
        break;
      }
      case Nemesis::kRestartServer: {
        FaultWindow f;
        f.kind = FaultWindow::kServerRestart;
        f.start_ns = MonotonicNanos();
        if (absl::Status st = server->Kill(); !st.ok()) nemesis_error = st;
        if (absl::Status st = server->Restart(); !st.ok()) nemesis_error = st;
        f.end_ns = MonotonicNanos();
        faults.push_back(f);
        ++result.restarts;
        break;
      }
    }
    next_fault = absl::Now() + spec.fault_every;
  }
  stop_all();
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!nemesis_error.ok()) return nemesis_error;

  std::vector<Attempt> attempts;
  for (int i = 0; i < spec.workers; ++i) {
    for (size_t gen = 0; gen < slots[i].size(); ++gen) {
      const Incarnation& inc = slots[i][gen];
      if (inc.died_ns < 0) {
        absl::Status s = CheckWorkerExit(inc.process, absl::StrCat(i, ".", gen));
        if (!s.ok()) return s;
      }
      absl::StatusOr<std::vector<Attempt>> a =
          ParseAttempts(ReadAll(inc.process.log), i, static_cast<int>(gen),
                        spec.kind == "rw" && i < spec.readers, resources_of(i), inc.died_ns);
      if (!a.ok()) return a.status();
      attempts.insert(attempts.end(), a->begin(), a->end());
    }
  }
  CheckParams p;
  p.kind = spec.kind;
  p.permits = spec.permits;
  p.queue_ttl_ns = absl::ToInt64Nanoseconds(spec.queue_ttl);
  p.ttl_ns = absl::ToInt64Nanoseconds(spec.ttl);
  result.report = CheckPrimitive(attempts, faults, p);
  return result;
}

std::vector<PrimitiveSpec> PrimitiveScenarios(absl::Duration total) {
  std::vector<PrimitiveSpec> v;
  for (const char* kind : {"rw", "semaphore", "fair", "multi"}) {
    PrimitiveSpec all;
    all.kind = kind;
    all.workers = std::string(kind) == "rw" ? 5 : 4;
    all.readers = 3;
    all.name = absl::StrCat(kind, ", pauses + kill -9 + server restarts (AOF)");
    all.persistence = true;
    all.faults = {Nemesis::kPauseHolder, Nemesis::kRestartServer, Nemesis::kKillHolder,
                  Nemesis::kPauseWaiter, Nemesis::kKillWaiter};
    v.push_back(all);
    PrimitiveSpec window = all;
    window.name = absl::StrCat(kind, ", server restarts, no persistence, restart window 1 s");
    window.persistence = false;
    window.restart_window = absl::Seconds(1);
    window.faults = {Nemesis::kRestartServer};
    window.fault_every = absl::Milliseconds(1500);
    v.push_back(window);
  }
  const absl::Duration each = std::max(absl::Seconds(3), total / static_cast<int64_t>(v.size()));
  for (auto& s : v) s.duration = each;
  return v;
}

std::string FormatPrimitiveTable(const std::vector<PrimitiveResult>& results) {
  std::string out =
      "| scenario | seconds | pauses (holder / waiter) | kills (holder / waiter) | restarts "
      "| acquires | grants "
      "| leases lost (watchdog) | raw overlaps (excused by validity) | violations "
      "| most valid holders | fair: queued waits / overtakes (excused) / FIFO violations "
      "| multi: failures / subset left / release unknown |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const PrimitiveReport& p = r.report;
    const std::string fair =
        r.spec.kind == "fair"
            ? absl::StrFormat("%d / %d (%d) / %d", p.queued_waits, p.overtakes,
                              p.overtakes_excused, p.fifo_violations)
            : "-";
    const std::string multi = r.spec.kind == "multi"
                                  ? absl::StrFormat("%d / %d / %d", p.failures, p.subset_left,
                                                    p.subset_unknown)
                                  : "-";
    absl::StrAppendFormat(
        &out, "| %s | %.1f | %d / %d | %d / %d | %d | %d | %d | %d | %d | %d | %d%s | %s | %s |\n",
        r.spec.name, r.seconds, r.holder_pauses, r.waiter_pauses, r.holder_kills, r.waiter_kills,
        r.restarts, p.attempts, p.grants, p.lost, p.raw_conflicts, p.violations,
        p.max_valid_holders,
        r.spec.kind == "semaphore" ? absl::StrCat(" of ", r.spec.permits) : "", fair, multi);
  }
  return out;
}

}  // namespace torture
}  // namespace dlock
