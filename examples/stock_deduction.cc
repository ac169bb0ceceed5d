// Stock deduction: 30 buyers race for 10 items. Each buyer reads the stock,
// and if some is left writes it back minus one -- a read-modify-write that
// would oversell without a lock. Every buyer has its own connection and
// waits for the item's lock with RetryLock (backoff with jitter, woken early
// by the release notification), so the sales happen one at a time.
// Result: exactly 10 sold, 20 told "sold out", stock 0 -- never negative.
//
// --postgres: the stock lives in a real PostgreSQL (started by the example),
// one item left, and the buyer holding the lock is PAUSED past its TTL after
// reading "1 left" (see examples/support/paused_holder.h). Another buyer
// takes over and sells the item; the paused one resumes and sells it again
// and writes its stale "0 left" over the other's -- unless the write is
// fenced: PgFencedStore refuses it, and exactly one sale is recorded.
// --postgres --nofencing shows the oversold item (exit 1).
//
//   bazel run //examples:stock_deduction [-- --redis=redis://127.0.0.1:6379]
//   bazel run //examples:stock_deduction -- --postgres [--nofencing]
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/examples/support/paused_holder.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(int, buyers, 30, "concurrent buyers");
ABSL_FLAG(int, stock, 10, "items in stock");
ABSL_FLAG(bool, postgres, false,
          "the paused-holder scenario on a private PostgreSQL (see the file comment)");
ABSL_FLAG(bool, fencing, true,
          "with --postgres: fence the writes (--nofencing shows the oversold item, exit 1)");

namespace dlock {
namespace examples {
namespace {

constexpr char kStockKey[] = "shop:sku-7:stock";
constexpr char kResource[] = "sku-7";

struct Buyer {
  Buyer(int id, EventLoop* loop, std::unique_ptr<Transport> t)
      : id(id), transport(std::move(t)), simple(loop, transport.get()),
        retry(loop, &simple) {}
  int id;
  std::unique_ptr<Transport> transport;
  SimpleLock simple;
  RetryLock retry;
};

// --postgres: stock(sku, qty) with the last item, sales(sku, buyer). Each
// holder reads qty and, if some is left, records a sale and writes qty - 1
// (a read-modify-write across the pause).
int MainPostgres() {
  if (absl::GetFlag(FLAGS_fake)) {
    Say("--postgres needs real servers (not --fake)");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, false);
  if (!env.ok()) {
    Say(env.status().ToString());
    return 2;
  }
  PausedHolderScenario sc;
  sc.resource = kResource;
  sc.setup = {
      "CREATE TABLE stock (sku text PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0))",
      "CREATE TABLE sales (id serial PRIMARY KEY, sku text NOT NULL, buyer text)",
      "INSERT INTO stock VALUES ('sku-7', 1)",
  };
  sc.read_sql = "SELECT qty FROM stock WHERE sku = $1";
  sc.read_params = {"sku-7"};
  sc.plan = [](const std::string& seen, const std::string& who) {
    PlannedWrite w;
    int64_t qty = 0;
    if (!absl::SimpleAtoi(seen, &qty) || qty <= 0) {
      w.description = "tell the buyer: sold out";
      return w;
    }
    w.sql =
        "WITH s AS (INSERT INTO sales (sku, buyer) VALUES ($1, $3)) "
        "UPDATE stock SET qty = $2 WHERE sku = $1";
    w.params = {"sku-7", absl::StrCat(qty - 1), who};
    w.description = absl::StrCat("sell one and write stock ", qty - 1);
    return w;
  };
  sc.check = [](fenced::PgFencedStore& db) {
    auto qty = db.Exec("SELECT qty FROM stock WHERE sku = 'sku-7'");
    auto sales = db.Exec("SELECT count(*), string_agg(buyer, ',') FROM sales");
    if (!qty.ok() || !sales.ok()) return false;
    int64_t q = -1, n = -1;
    absl::SimpleAtoi(qty->rows[0][0].value_or("-1"), &q);
    absl::SimpleAtoi(sales->rows[0][0].value_or("-1"), &n);
    Say(absl::StrCat("sku-7: 1 item at the start; ", n, " sale(s) recorded (to ",
                     sales->rows[0][1].value_or("nobody"), "); stock now ", q,
                     n > 1 ? " -- OVERSOLD" : ""));
    return q >= 0 && n == 1 && q + n == 1;
  };
  return RunPausedHolder(sc, **env, absl::GetFlag(FLAGS_fencing));
}

int Main() {
  if (absl::GetFlag(FLAGS_postgres)) return MainPostgres();
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  const int initial = absl::GetFlag(FLAGS_stock);
  int sold = 0, sold_out = 0, failed = 0, finished = 0;
  int64_t final_stock = -999;
  {
    auto admin = e.Connect(0);
    bool set = false;
    admin->Send({"SET", kStockKey, absl::StrCat(initial)}, absl::Seconds(2),
                [&](absl::StatusOr<Reply>) { set = true; }).IgnoreError();
    e.RunUntil([&] { return set; });
    Say(absl::StrCat(initial, " items in stock; ", absl::GetFlag(FLAGS_buyers),
                     " buyers arrive at once"));

    std::vector<std::unique_ptr<Buyer>> buyers;
    for (int i = 0; i < absl::GetFlag(FLAGS_buyers); ++i) {
      buyers.push_back(std::make_unique<Buyer>(i, e.loop(), e.Connect(0)));
    }
    for (auto& bp : buyers) {
      Buyer* b = bp.get();
      AcquireOptions o;
      o.ttl = absl::Seconds(5);
      o.wait = absl::Seconds(20);
      auto h = b->retry.Acquire(kResource, o, [&, b](absl::StatusOr<Lease> lease) {
        if (!lease.ok()) {
          Say(absl::StrCat("buyer ", b->id, ": no lock: ", lease.status().ToString()));
          ++failed;
          ++finished;
          return;
        }
        Lease held = *lease;
        auto release = [&, b, held] {
          b->retry.Release(held, [&](absl::Status) { ++finished; }).IgnoreError();
        };
        b->transport->Send({"GET", kStockKey}, absl::Seconds(2),
                           [&, b, held, release](absl::StatusOr<Reply> r) {
          int64_t stock = 0;
          if (!r.ok() || !r->is_string() || !absl::SimpleAtoi(r->str, &stock)) {
            ++failed;
            return release();
          }
          if (stock <= 0) {
            ++sold_out;
            Say(absl::StrCat("buyer ", b->id, ": sold out"));
            return release();
          }
          // Plain GET then SET: only the lock makes this safe.
          b->transport->Send({"SET", kStockKey, absl::StrCat(stock - 1)}, absl::Seconds(2),
                             [&, b, held, stock, release](absl::StatusOr<Reply>) {
            ++sold;
            Say(absl::StrCat("buyer ", b->id, ": bought one (", stock - 1,
                             " left, fence ", held.fence, ")"));
            release();
          }).IgnoreError();
        }).IgnoreError();
      });
      if (!h.ok()) {
        ++failed;
        ++finished;
      }
    }
    e.RunUntil([&] { return finished == static_cast<int>(buyers.size()); },
               absl::Seconds(60));
    bool got = false;
    admin->Send({"GET", kStockKey}, absl::Seconds(2), [&](absl::StatusOr<Reply> r) {
      got = true;
      if (r.ok() && r->is_string()) absl::SimpleAtoi(r->str, &final_stock);
    }).IgnoreError();
    e.RunUntil([&] { return got; });
    buyers.clear();
  }
  Say(absl::StrCat("sold ", sold, ", sold out for ", sold_out, ", errors ", failed,
                   "; stock now ", final_stock));
  const bool ok = sold == initial && final_stock == 0 && failed == 0;
  Say(ok ? "never oversold" : "UNEXPECTED RESULT");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
