// Scheduled task on several nodes: three nodes run the same "nightly report"
// scheduler, firing every tick. At each tick every node tries the tick's
// lock (SimpleLock on "report:<tick>"); the one that gets it runs the task.
// The lock is NOT released after the run: it expires with its TTL, longer
// than any clock skew between nodes, so a node that fires late for the same
// tick still finds it taken. Result: every tick ran exactly once.
//
//   bazel run //examples:scheduled_task [-- --redis=redis://127.0.0.1:6379]
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/simple_lock.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(int, ticks, 5, "ticks to run");
ABSL_FLAG(absl::Duration, tick, absl::Milliseconds(200), "tick period");

namespace dlock {
namespace examples {
namespace {

struct Node {
  Node(std::string name, EventLoop* loop, std::unique_ptr<Transport> t)
      : name(std::move(name)), transport(std::move(t)), lock(loop, transport.get()) {}
  std::string name;
  std::unique_ptr<Transport> transport;
  SimpleLock lock;
};

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  const int ticks = absl::GetFlag(FLAGS_ticks);
  const absl::Duration period = absl::GetFlag(FLAGS_tick);
  // A run id keeps the lock names of this run apart from earlier runs on a
  // shared --redis server.
  absl::BitGen rng;
  const std::string run_id = absl::StrCat(absl::Uniform<uint64_t>(rng));
  std::map<int, std::vector<std::string>> ran;  // tick -> nodes that ran it
  int attempts_done = 0;
  {
    std::vector<std::unique_ptr<Node>> nodes;
    for (const char* name : {"node-a", "node-b", "node-c"}) {
      nodes.push_back(std::make_unique<Node>(name, e.loop(), e.Connect(0)));
    }
    for (int tick = 1; tick <= ticks; ++tick) {
      for (size_t n = 0; n < nodes.size(); ++n) {
        Node* node = nodes[n].get();
        // Each node's timer fires at the tick, a little skewed per node.
        e.loop()->RunAfter(period * tick + absl::Milliseconds(3 * n), [&, node, tick] {
          AcquireOptions o;
          o.ttl = absl::Seconds(30);  // >> skew between nodes
          auto h = node->lock.Acquire(
              absl::StrCat("report:", run_id, ":", tick), o,
              [&, node, tick](absl::StatusOr<Lease> lease) {
                ++attempts_done;
                if (lease.ok()) {
                  ran[tick].push_back(node->name);
                  Say(absl::StrCat("tick ", tick, ": ", node->name,
                                   " runs the report (fence ", lease->fence, ")"));
                } else if (absl::IsAborted(lease.status())) {
                  Say(absl::StrCat("tick ", tick, ": ", node->name,
                                   " skips: another node has it"));
                } else {
                  Say(absl::StrCat("tick ", tick, ": ", node->name, ": ",
                                   lease.status().ToString()));
                }
              });
          if (!h.ok()) ++attempts_done;
        });
      }
    }
    const int expected = ticks * static_cast<int>(nodes.size());
    e.RunUntil([&] { return attempts_done == expected; }, period * ticks + absl::Seconds(20));
  }
  bool ok = true;
  for (int tick = 1; tick <= ticks; ++tick) {
    if (ran[tick].size() != 1) ok = false;
  }
  Say(ok ? absl::StrCat("every one of ", ticks, " ticks ran exactly once")
         : "UNEXPECTED: some tick ran zero or several times");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
