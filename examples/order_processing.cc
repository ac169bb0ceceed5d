// Order processing: the same order is delivered twice (a message queue's
// at-least-once redelivery) to two workers at the same moment, and once more
// after it was done. Each worker takes the order's lock (SimpleLock: one
// SET NX PX attempt), checks whether the order was already processed, and
// only then charges it. Result: the order is charged exactly once.
//
//   bazel run //examples:order_processing [-- --redis=redis://127.0.0.1:6379]
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/transport.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");

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
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    auto handle = lock_.Acquire(absl::StrCat("order:", order), o,
                                [this, order, done](absl::StatusOr<Lease> lease) {
      if (!lease.ok()) {
        Say(absl::StrCat(name_, ": order ", order, " is being handled elsewhere (",
                         lease.status().ToString(), "); dropping this delivery"));
        return done();
      }
      Lease held = *lease;
      // Under the lock: was it processed already? (SET NX succeeds only
      // the first time: the record of processed orders.)
      transport_->Send({"SET", "orders:processed:" + order, "1", "NX"}, absl::Seconds(2),
                       [this, order, held, done](absl::StatusOr<Reply> r) {
        bool first = r.ok() && r->is_status() && r->str == "OK";
        auto release = [this, held, done] {
          lock_.Release(held, [done](absl::Status) { done(); }).IgnoreError();
        };
        if (!first) {
          Say(absl::StrCat(name_, ": order ", order, " already processed; skipping"));
          return release();
        }
        transport_->Send({"INCR", absl::StrCat("orders:charged:", order)}, absl::Seconds(2),
                         [this, order, held, release](absl::StatusOr<Reply>) {
          Say(absl::StrCat(name_, ": charged order ", order, " (fence ", held.fence, ")"));
          release();
        }).IgnoreError();
      }).IgnoreError();
    });
    if (!handle.ok()) {
      Say(absl::StrCat(name_, ": ", handle.status().ToString()));
      done();
    }
  }

 private:
  std::string name_;
  std::unique_ptr<Transport> transport_;
  SimpleLock lock_;
};

int Main(const std::vector<std::string>& urls) {
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
