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
ABSL_FLAG(bool, unlocked, false,
          "skip the lock (shows the race: the order is charged twice, exit 1)");
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
