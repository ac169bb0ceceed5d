// Stock deduction: 30 buyers race for 10 items. Each buyer reads the stock,
// and if some is left writes it back minus one -- a read-modify-write that
// would oversell without a lock. Every buyer has its own connection and
// waits for the item's lock with RetryLock (backoff with jitter, woken early
// by the release notification), so the sales happen one at a time.
// Result: exactly 10 sold, 20 told "sold out", stock 0 -- never negative.
//
//   bazel run //examples:stock_deduction [-- --redis=redis://127.0.0.1:6379]
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(int, buyers, 30, "concurrent buyers");
ABSL_FLAG(int, stock, 10, "items in stock");

namespace dlock {
namespace examples {
namespace {

constexpr char kStockKey[] = "shop:sku-7:stock";
constexpr char kResource[] = "sku-7";

struct Buyer {
  Buyer(int id, EventLoop* loop, std::unique_ptr<Transport> t)
      : id(id), transport(std::move(t)), simple(loop, transport.get()),
        retry(loop, &simple, transport.get()) {}
  int id;
  std::unique_ptr<Transport> transport;
  SimpleLock simple;
  RetryLock retry;
};

int Main() {
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
