#include "dlock/tests/torture/fenced_torture.h"

#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dlock/fenced/pg_store.h"
#include "dlock/testing/pg_process.h"
#include "dlock/testing/redis_process.h"
#include "dlock/testing/redis_server.h"
#include "dlock/tests/torture/worker_processes.h"

namespace dlock {
namespace torture {
namespace {

absl::StatusOr<int64_t> QueryInt(fenced::PgFencedStore& db, const std::string& sql) {
  absl::StatusOr<fenced::PgResult> r = db.Exec(sql);
  if (!r.ok()) return r.status();
  int64_t v = 0;
  if (r->rows.empty() || !r->rows[0][0] || !absl::SimpleAtoi(*r->rows[0][0], &v)) {
    return absl::InternalError(absl::StrCat("no integer from ", sql));
  }
  return v;
}

// Waits up to `limit` for `w` to exit on its own, then stops it.
void Finish(WorkerProcess* w, absl::Duration limit) {
  if (w->pid <= 0 || w->exited) return;
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    int st = 0;
    if (waitpid(w->pid, &st, WNOHANG) == w->pid) {
      w->status = st;
      w->exited = true;
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  StopWorker(w);
}

// The integer value of `key` on the protected Redis (0 when missing).
absl::StatusOr<int64_t> RedisInt(test_support::RedisServer& redis, const std::string& key) {
  absl::StatusOr<Reply> r = redis.Command({"GET", key});
  if (!r.ok()) return r.status();
  if (r->type == Reply::Type::kNil) return 0;
  int64_t v = 0;
  if (r->type != Reply::Type::kString || !absl::SimpleAtoi(r->str, &v)) {
    return absl::InternalError(absl::StrCat("GET ", key, ": not an integer"));
  }
  return v;
}

}  // namespace

const char* FencedStoreName(FencedStoreKind kind) {
  return kind == FencedStoreKind::kRedis ? "redis" : "postgres";
}

absl::StatusOr<FencedTortureResult> RunFencedTorture(const FencedTortureOptions& o) {
  if (o.workers <= 0 || o.workers > kFencedMaxWorkers) {
    return absl::InvalidArgumentError("workers out of range");
  }
  const std::string root = TempRoot();
  if (root.empty()) return absl::InternalError("no temporary directory");
  absl::StatusOr<std::unique_ptr<test_support::RedisProcess>> redis = test_support::RedisProcess::Start();
  if (!redis.ok()) return redis.status();
  // The protected store: PostgreSQL, or a second redis-server.
  std::unique_ptr<test_support::PgProcess> pg;
  std::unique_ptr<fenced::PgFencedStore> admin;
  std::unique_ptr<test_support::RedisServer> store_redis;
  std::vector<std::string> store_args;
  absl::Status s;
  if (o.store == FencedStoreKind::kPostgres) {
    absl::StatusOr<std::unique_ptr<test_support::PgProcess>> started = test_support::PgProcess::Start();
    if (!started.ok()) return started.status();
    pg = std::move(*started);
    fenced::PgStoreOptions so;
    so.conninfo = pg->conninfo();
    absl::StatusOr<std::unique_ptr<fenced::PgFencedStore>> connected =
        fenced::PgFencedStore::Connect(so);
    if (!connected.ok()) return connected.status();
    admin = std::move(*connected);
    s = admin->CreateFenceTable();
    for (const char* sql :
         {"CREATE TABLE counter (id int PRIMARY KEY, value bigint NOT NULL)",
          "INSERT INTO counter VALUES (1, 0)",
          "CREATE TABLE increments (seq bigserial PRIMARY KEY, worker int, fence bigint)"}) {
      if (s.ok()) s = admin->Exec(sql).status();
    }
    if (!s.ok()) return s;
    store_args = {"--store=postgres", "--pg=" + pg->conninfo()};
  } else {
    absl::StatusOr<std::unique_ptr<test_support::RedisServer>> started = test_support::RedisServer::Start();
    if (!started.ok()) return started.status();
    store_redis = std::move(*started);
    store_args = {"--store=redis", absl::StrCat("--store_port=", store_redis->port())};
  }

  SharedFlags flags;
  s = flags.Create(root + "/flags");
  if (!s.ok()) return s;
  const absl::Time start = absl::Now();
  const absl::Time end = start + o.duration;
  std::vector<WorkerProcess> workers(o.workers);
  auto spawn = [&](int i) {
    flags.slots[i].store(0);
    const int64_t seconds =
        std::max<int64_t>(1, absl::ToInt64Seconds(end - absl::Now() + absl::Seconds(1)) - 1);
    std::vector<std::string> args = {
        "--redis=" + (*redis)->url(), "--flags=" + root + "/flags", absl::StrCat("--id=", i),
        o.fencing ? "--fencing" : "--nofencing",
        o.fence_reads ? "--fence_reads" : "--nofence_reads",
        absl::StrCat("--ttl_ms=", absl::ToInt64Milliseconds(o.ttl)),
        absl::StrCat("--seconds=", seconds)};
    args.insert(args.end(), store_args.begin(), store_args.end());
    return SpawnWorker(o.worker_path, args, absl::StrCat(root, "/worker", i, ".err"),
                       &workers[i]);
  };
  for (int i = 0; i < o.workers; ++i) {
    s = spawn(i);
    if (!s.ok()) return s;
  }

  FencedTortureResult result;
  absl::BitGen gen;
  absl::Time next_kill = start + o.kill_every;
  while (absl::Now() < end) {
    if (absl::Now() >= next_kill) {
      const int i = absl::Uniform(gen, 0, o.workers);
      KillWorker(&workers[i]);
      ++result.kills;
      s = spawn(i);
      if (!s.ok()) return s;
      next_kill = absl::Now() + o.kill_every;
      continue;
    }
    // Pause a worker that is between its read and its write, past the TTL.
    int victim = -1;
    const int first = absl::Uniform(gen, 0, o.workers);
    for (int k = 0; k < o.workers && victim < 0; ++k) {
      const int i = (first + k) % o.workers;
      if (flags.slots[i].load() == 1) victim = i;
    }
    if (victim < 0) {
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    kill(workers[victim].pid, SIGSTOP);
    if (WaitStopped(&workers[victim])) {
      ++result.pauses;
      absl::SleepFor(o.ttl * o.pause_factor);  // the pause itself
      kill(workers[victim].pid, SIGCONT);
    } else {
      s = spawn(victim);  // it had exited: keep the worker count
      if (!s.ok()) return s;
    }
    absl::SleepFor(o.ttl / 2);  // let the others make progress between pauses
  }
  for (WorkerProcess& w : workers) Finish(&w, absl::Seconds(10));

  for (int i = 0; i < o.workers; ++i) {
    result.stale_refused += flags.slots[kFencedStaleSlot + i].load();
    result.write_errors += flags.slots[kFencedErrorSlot + i].load();
  }
  absl::StatusOr<int64_t> inc =
      admin ? QueryInt(*admin, "SELECT count(*) FROM increments")
            : RedisInt(*store_redis, kFencedRedisIncrementsKey);
  absl::StatusOr<int64_t> counter =
      admin ? QueryInt(*admin, "SELECT value FROM counter WHERE id = 1")
            : RedisInt(*store_redis, kFencedRedisCounterKey);
  if (!inc.ok()) return inc.status();
  if (!counter.ok()) return counter.status();
  result.increments = *inc;
  result.counter = *counter;
  result.lost_updates = *inc - *counter;
  return result;
}

std::string FencedTortureRow(const FencedTortureOptions& o, const FencedTortureResult& r) {
  return absl::StrFormat("| %s | %s | %d | %d | %s | %d | %d | %d | %d | **%d** | %d |",
                         FencedStoreName(o.store), !o.fencing ? "off" : o.fence_reads ? "on" : "writes only",
                         o.workers,
                         static_cast<int>(absl::ToInt64Seconds(o.duration)),
                         absl::FormatDuration(o.ttl), r.pauses, r.kills, r.increments, r.counter,
                         r.lost_updates, r.stale_refused);
}

}  // namespace torture
}  // namespace dlock
