// Order processing: the same order is delivered twice (a message queue's
// at-least-once redelivery) to two workers at the same moment, and once more
// after it was done. Each worker takes the order's lock (SimpleLock: one
// SET NX PX attempt), then does what most order handlers do: reads the
// order's state ("processed?"), charges the customer, and records the order
// as processed -- three separate steps, the check-then-act race of the
// original design document. The lock is what makes them one step: the
// result is that the order is charged exactly once.
//
// --unlocked runs the same workers without the lock, to show the race: both
// workers read "not processed" before either records it, and the order is
// charged twice (the program then exits 1). The tests run both, so the
// example fails if the lock stops doing its job.
//
// --postgres: the order lives in a real PostgreSQL (started by the example)
// and the holder of the lock is PAUSED past its TTL after reading "pending"
// (see examples/support/paused_holder.h). Another worker takes over and
// charges the order; the paused one resumes and charges it again -- unless
// the write is fenced: PgFencedStore refuses the stale holder's write, and
// the order is charged exactly once. --postgres --nofencing shows the double
// charge (exit 1).
//
//   bazel run //examples:order_processing [-- --redis=redis://127.0.0.1:6379]
//   bazel run //examples:order_processing -- --postgres [--nofencing]
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/examples/support/paused_holder.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/transport.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(bool, unlocked, false,
          "skip the lock (shows the race: the order is charged twice, exit 1)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(bool, postgres, false,
          "the paused-holder scenario on a private PostgreSQL (see the file comment)");
ABSL_FLAG(bool, fencing, true,
          "with --postgres: fence the writes (--nofencing shows the double charge, exit 1)");

namespace dlock {
namespace examples {
namespace {

// One worker process: its own connection and lock.
class Worker {
 public:
  Worker(std::string name, EventLoop* loop, std::unique_ptr<Transport> t)
      : name_(std::move(name)), transport_(std::move(t)), lock_(loop, transport_.get()) {}

  // Handles one delivery of `order`; `done` runs when finished.
  void Handle(const std::string& order, std::function<void()> done) {
    if (absl::GetFlag(FLAGS_unlocked)) return Process(order, nullptr, std::move(done));
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    auto handle = lock_.Acquire(absl::StrCat("order:", order), o,
                                [this, order, done](absl::StatusOr<Lease> lease) {
      if (!lease.ok()) {
        Say(absl::StrCat(name_, ": order ", order, " is being handled elsewhere (",
                         lease.status().ToString(), "); dropping this delivery"));
        return done();
      }
      auto held = std::make_shared<Lease>(*lease);
      Process(order, held, [this, held, done] {
        lock_.Release(*held, [done](absl::Status) { done(); }).IgnoreError();
      });
    });
    if (!handle.ok()) {
      Say(absl::StrCat(name_, ": ", handle.status().ToString()));
      done();
    }
  }

 private:
  // The handler's three steps: read the order's state, charge, record it as
  // processed. `held` is the lease (null when --unlocked).
  void Process(const std::string& order, std::shared_ptr<Lease> held,
               std::function<void()> done) {
    const std::string processed = "orders:processed:" + order;
    transport_->Send({"GET", processed}, absl::Seconds(2),
                     [this, order, processed, held, done](absl::StatusOr<Reply> r) {
      if (!r.ok()) {
        Say(absl::StrCat(name_, ": cannot read order ", order, ": ", r.status().ToString()));
        return done();
      }
      if (!r->is_nil()) {
        Say(absl::StrCat(name_, ": order ", order, " already processed; skipping"));
        return done();
      }
      transport_->Send({"INCR", absl::StrCat("orders:charged:", order)}, absl::Seconds(2),
                       [this, order, processed, held, done](absl::StatusOr<Reply>) {
        Say(held ? absl::StrCat(name_, ": charged order ", order, " (fence ", held->fence, ")")
                 : absl::StrCat(name_, ": charged order ", order, " (no lock)"));
        transport_->Send({"SET", processed, "1"}, absl::Seconds(2),
                         [done](absl::StatusOr<Reply>) { done(); }).IgnoreError();
      }).IgnoreError();
    }).IgnoreError();
  }

 private:
  std::string name_;
  std::unique_ptr<Transport> transport_;
  SimpleLock lock_;
};

// --postgres: orders(id, status, charged) and one payments row per charge.
// Each holder reads the order's status and, if "pending", charges it.
int MainPostgres(const std::vector<std::string>& urls) {
  if (absl::GetFlag(FLAGS_fake)) {
    Say("--postgres needs real servers (not --fake)");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env = ExampleEnv::Create(urls, 1, false);
  if (!env.ok()) {
    Say(env.status().ToString());
    return 2;
  }
  PausedHolderScenario sc;
  sc.resource = "order:1001";
  sc.setup = {
      "CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, charged int NOT NULL)",
      "CREATE TABLE payments (id serial PRIMARY KEY, order_id text NOT NULL, worker text)",
      "INSERT INTO orders VALUES ('1001', 'pending', 0)",
  };
  sc.read_sql = "SELECT status FROM orders WHERE id = $1";
  sc.read_params = {"1001"};
  sc.plan = [](const std::string& seen, const std::string& who) {
    PlannedWrite w;
    if (seen != "pending") {
      w.description = "do nothing (already paid)";
      return w;
    }
    // The charge and the state change, one statement.
    w.sql =
        "WITH p AS (INSERT INTO payments (order_id, worker) VALUES ($1, $2)) "
        "UPDATE orders SET status = 'paid', charged = charged + 1 WHERE id = $1";
    w.params = {"1001", who};
    w.description = "charge order 1001 and mark it paid";
    return w;
  };
  sc.check = [](fenced::PgFencedStore& db) {
    auto charged = db.Exec("SELECT charged FROM orders WHERE id = '1001'");
    auto payments = db.Exec("SELECT count(*), string_agg(worker, ',') FROM payments");
    if (!charged.ok() || !payments.ok()) return false;
    const std::string c = charged->rows[0][0].value_or("?");
    const std::string n = payments->rows[0][0].value_or("?");
    Say(absl::StrCat("order 1001: charged ", c, " time(s); payments rows: ", n, " (by ",
                     payments->rows[0][1].value_or("nobody"), ")"));
    return c == "1" && n == "1";
  };
  return RunPausedHolder(sc, **env, absl::GetFlag(FLAGS_fencing));
}

int Main(const std::vector<std::string>& urls) {
  if (absl::GetFlag(FLAGS_postgres)) return MainPostgres(urls);
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env = ExampleEnv::Create(urls, 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  const std::string order = "1001";
  int charged = -1;
  {
    auto admin = e.Connect(0);
    int pending = 0;
    // Start clean (a shared --redis server may have old data).
    admin->Send({"DEL", "orders:processed:" + order, "orders:charged:" + order}, absl::Seconds(2),
                [&pending](absl::StatusOr<Reply>) { --pending; }).IgnoreError();
    ++pending;
    e.RunUntil([&] { return pending == 0; });

    Worker a("worker-a", e.loop(), e.Connect(0));
    Worker b("worker-b", e.loop(), e.Connect(0));
    Say("order 1001 delivered to worker-a and worker-b at the same time");
    pending = 2;
    a.Handle(order, [&] { --pending; });
    b.Handle(order, [&] { --pending; });
    e.RunUntil([&] { return pending == 0; });
    Say("order 1001 redelivered to worker-b later");
    pending = 1;
    b.Handle(order, [&] { --pending; });
    e.RunUntil([&] { return pending == 0; });

    bool got = false;
    admin->Send({"GET", "orders:charged:" + order}, absl::Seconds(2),
                [&](absl::StatusOr<Reply> r) {
      got = true;
      if (r.ok() && r->is_string()) charged = std::stoi(r->str);
    }).IgnoreError();
    e.RunUntil([&] { return got; });
  }
  Say(absl::StrCat("order 1001 was charged ", charged, " time(s)"));
  return charged == 1 ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main(absl::GetFlag(FLAGS_redis));
}
