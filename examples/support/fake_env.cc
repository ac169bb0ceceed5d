// The in-memory ExampleEnv: FakeRedis servers and FakeTransport connections
// on a ManualEventLoop, in virtual time (an example's seconds of waiting
// take microseconds). Linked only into the testonly *_fake example
// binaries; it registers itself with ExampleEnv::Create.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace examples {
namespace {

class FakeEnv : public ExampleEnv {
 public:
  explicit FakeEnv(int servers) {
    for (int i = 0; i < servers; ++i) {
      servers_.push_back(std::make_unique<FakeRedis>(&loop_));
      // Never used: declared trusted, so RedLock counts it at once (see
      // dlock::TrustDataSetCommand; unsafe after a restart that lost data).
      servers_.back()->Execute(TrustDataSetCommand(KeyScheme{}));
      killed_.push_back(false);
      conns_.emplace_back();
    }
  }

  EventLoop* loop() override { return &loop_; }
  size_t servers() const override { return servers_.size(); }
  std::string address(size_t i) const override { return absl::StrCat("fake-", i); }

  std::unique_ptr<Transport> Connect(size_t i) override {
    auto t = std::make_unique<FakeTransport>(&loop_, servers_[i].get());
    // Each client is a little further away than the last, so concurrent
    // clients do not all arrive in the same instant.
    t->SetLatency(absl::Microseconds(100 + 10 * next_conn_++));
    if (killed_[i]) t->Partition();
    conns_[i].push_back(t.get());
    return t;
  }

  bool RunUntil(absl::FunctionRef<bool()> done, absl::Duration timeout) override {
    const absl::Time deadline = loop_.Now() + timeout;
    while (!done()) {
      loop_.RunUntilIdle();
      if (done()) break;
      if (!loop_.RunNext() || loop_.Now() > deadline) break;
    }
    return done();
  }

  absl::Status KillServer(size_t i) override {
    // A dead server: every connection to it fails from now on, and it
    // comes back (if ever) empty.
    killed_[i] = true;
    servers_[i]->Restart();
    for (FakeTransport* t : conns_[i]) t->Partition();
    return absl::OkStatus();
  }

 private:
  ManualEventLoop loop_;
  std::vector<std::unique_ptr<FakeRedis>> servers_;
  std::vector<bool> killed_;
  // Connections handed out (not owned; the example destroys them before the
  // env, as the ExampleEnv contract requires).
  std::vector<std::vector<FakeTransport*>> conns_;
  int next_conn_ = 0;
};

const bool kRegistered = RegisterFakeEnv(
    [](int servers) -> std::unique_ptr<ExampleEnv> {
      return std::make_unique<FakeEnv>(servers);
    });

}  // namespace
}  // namespace examples
}  // namespace dlock
