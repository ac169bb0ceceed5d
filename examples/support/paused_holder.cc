#include "dlock/examples/support/paused_holder.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/pg_process.h"

namespace dlock {
namespace examples {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(1);

// One Acquire on `lock`, run to completion on the env's loop.
absl::StatusOr<Lease> AcquireNow(ExampleEnv& env, SimpleLock& lock, const std::string& resource) {
  AcquireOptions o;
  o.ttl = kTtl;
  bool done = false;
  absl::StatusOr<Lease> out = absl::UnknownError("no reply");
  auto handle = lock.Acquire(resource, o, [&](absl::StatusOr<Lease> lease) {
    out = std::move(lease);
    done = true;
  });
  if (!handle.ok()) return handle.status();
  if (!env.RunUntil([&] { return done; })) return absl::DeadlineExceededError("acquire timed out");
  return out;
}

absl::Status ReleaseNow(ExampleEnv& env, SimpleLock& lock, const Lease& lease) {
  bool done = false;
  absl::Status out;
  absl::Status s = lock.Release(lease, [&](absl::Status r) {
    out = std::move(r);
    done = true;
  });
  if (!s.ok()) return s;
  env.RunUntil([&] { return done; });
  return out;
}

// Waits on the loop (the paused holder's code is not running meanwhile).
void Pass(ExampleEnv& env, absl::Duration d) {
  bool fired = false;
  env.loop()->RunAfter(d, [&fired] { fired = true; });
  env.RunUntil([&] { return fired; }, d + absl::Seconds(5));
}

absl::StatusOr<fenced::PgResult> Apply(fenced::PgFencedStore& store, bool fencing,
                                       const std::string& resource, int64_t fence,
                                       const PlannedWrite& w) {
  if (fencing) return store.Write(resource, fence, w.sql, w.params);
  return store.Exec(w.sql, w.params);
}

absl::StatusOr<std::string> Read(fenced::PgFencedStore& store, bool fencing,
                                 const PausedHolderScenario& sc, int64_t fence) {
  absl::StatusOr<fenced::PgResult> r = fencing
                                           ? store.Write(sc.resource, fence, sc.read_sql,
                                                         sc.read_params)
                                           : store.Exec(sc.read_sql, sc.read_params);
  if (!r.ok()) return r.status();
  if (r->rows.empty() || r->rows[0].empty() || !r->rows[0][0].has_value()) {
    return absl::NotFoundError(absl::StrCat("no value from ", sc.read_sql));
  }
  return *r->rows[0][0];
}

}  // namespace

int RunPausedHolder(const PausedHolderScenario& sc, ExampleEnv& env, bool fencing) {
  Say("starting a private PostgreSQL (initdb in a temporary directory, loopback only)");
  absl::StatusOr<std::unique_ptr<test_support::PgProcess>> pg = test_support::PgProcess::Start();
  if (!pg.ok()) {
    Say(absl::StrCat("cannot start PostgreSQL: ", pg.status().ToString()));
    return 2;
  }
  fenced::PgStoreOptions options;
  options.conninfo = (*pg)->conninfo();
  auto admin = fenced::PgFencedStore::Connect(options);
  auto store_a = fenced::PgFencedStore::Connect(options);
  auto store_b = fenced::PgFencedStore::Connect(options);
  if (!admin.ok() || !store_a.ok() || !store_b.ok()) {
    Say(absl::StrCat("cannot connect to PostgreSQL: ", admin.status().ToString()));
    return 2;
  }
  absl::Status s = (*admin)->CreateFenceTable();
  for (const std::string& sql : sc.setup) {
    if (s.ok()) s = (*admin)->Exec(sql).status();
  }
  if (!s.ok()) {
    Say(absl::StrCat("cannot create the tables: ", s.ToString()));
    return 2;
  }
  Say(fencing ? "fencing ON: every write goes through PgFencedStore with the writer's fence"
              : "fencing OFF (--nofencing): writes are plain statements");

  std::unique_ptr<Transport> ta = env.Connect(0);
  std::unique_ptr<Transport> tb = env.Connect(0);
  if (ta == nullptr || tb == nullptr) return 2;
  SimpleLock lock_a(env.loop(), ta.get());
  SimpleLock lock_b(env.loop(), tb.get());

  // 1. A takes the lock and reads.
  absl::StatusOr<Lease> lease_a = AcquireNow(env, lock_a, sc.resource);
  if (!lease_a.ok()) {
    Say(absl::StrCat("A: cannot take the lock: ", lease_a.status().ToString()));
    return 2;
  }
  absl::StatusOr<std::string> seen_a = Read(**store_a, fencing, sc, lease_a->fence);
  if (!seen_a.ok()) {
    Say(absl::StrCat("A: read failed: ", seen_a.status().ToString()));
    return 2;
  }
  const PlannedWrite plan_a = sc.plan(*seen_a, "A");
  Say(absl::StrCat("A: holds the lock on ", sc.resource, " (fence ", lease_a->fence,
                   ", TTL ", absl::FormatDuration(kTtl), "), reads \"", *seen_a,
                   "\", decides to ", plan_a.description));

  // 2. A is paused; B is refused while A's lease is live.
  Say("A: PAUSED (a stop-the-world GC, SIGSTOP, a VM migration): its code does not run");
  absl::StatusOr<Lease> early = AcquireNow(env, lock_b, sc.resource);
  if (early.ok()) {
    Say("B: got the lock while A's lease was live -- the lock is broken");
    return 1;
  }
  Say(absl::StrCat("B: refused while A's lease is live (", early.status().ToString(), ")"));

  // 3. A's lease expires; B takes over, reads, writes, commits, releases.
  Pass(env, kTtl + absl::Milliseconds(100));
  absl::StatusOr<Lease> lease_b = AcquireNow(env, lock_b, sc.resource);
  for (int i = 0; i < 20 && !lease_b.ok() && absl::IsAborted(lease_b.status()); ++i) {
    Pass(env, absl::Milliseconds(100));
    lease_b = AcquireNow(env, lock_b, sc.resource);
  }
  if (!lease_b.ok()) {
    Say(absl::StrCat("B: cannot take the lock after A's TTL: ", lease_b.status().ToString()));
    return 2;
  }
  absl::StatusOr<std::string> seen_b = Read(**store_b, fencing, sc, lease_b->fence);
  if (!seen_b.ok()) {
    Say(absl::StrCat("B: read failed: ", seen_b.status().ToString()));
    return 2;
  }
  const PlannedWrite plan_b = sc.plan(*seen_b, "B");
  Say(absl::StrCat("B: A's lease expired; B holds the lock (fence ", lease_b->fence,
                   "), reads \"", *seen_b, "\", decides to ", plan_b.description));
  if (!plan_b.sql.empty()) {
    absl::StatusOr<fenced::PgResult> wb =
        Apply(**store_b, fencing, sc.resource, lease_b->fence, plan_b);
    Say(absl::StrCat("B: write ", wb.ok() ? "committed" : wb.status().ToString()));
    if (!wb.ok()) return 2;
  }
  ReleaseNow(env, lock_b, *lease_b).IgnoreError();
  Say("B: released the lock");

  // 4. A resumes and writes what it decided before the pause.
  Say("A: RESUMES, unaware that its lease expired, and writes what it decided");
  bool a_refused = false;
  if (!plan_a.sql.empty()) {
    absl::StatusOr<fenced::PgResult> wa =
        Apply(**store_a, fencing, sc.resource, lease_a->fence, plan_a);
    if (wa.ok()) {
      Say("A: write committed (nothing stopped the stale holder)");
    } else if (fenced::IsStaleFence(wa.status())) {
      a_refused = true;
      Say(absl::StrCat("A: write REFUSED by the database: ", wa.status().message()));
    } else {
      Say(absl::StrCat("A: write failed: ", wa.status().ToString()));
      return 2;
    }
  }
  absl::Status released = ReleaseNow(env, lock_a, *lease_a);
  Say(absl::StrCat("A: release: ", released.ok() ? "OK" : released.ToString()));

  const bool right = sc.check(**admin);
  if (fencing) {
    if (right && a_refused) {
      Say("RESULT: rows exactly right; the paused holder's stale write was refused");
      return 0;
    }
    Say("RESULT: UNEXPECTED -- fencing did not protect the rows");
    return 1;
  }
  if (!right) {
    Say("RESULT: LOST UPDATE, as predicted without fencing (exit 1)");
    return 1;
  }
  Say("RESULT: no lost update without fencing -- the scenario did not reproduce the race");
  return 0;
}

}  // namespace examples
}  // namespace dlock
