#include "dlock/examples/support/example_env.h"

#include <uv.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "dlock/testing/redis_process.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {
namespace examples {
namespace {

using ::dlock::test_support::RedisProcess;

FakeEnvFactory& FakeFactory() {
  static FakeEnvFactory* const kFactory = new FakeEnvFactory();
  return *kFactory;
}

class RealEnv : public ExampleEnv {
 public:
  static absl::StatusOr<std::unique_ptr<ExampleEnv>> Create(
      const std::vector<std::string>& urls, int servers) {
    std::unique_ptr<RealEnv> env(new RealEnv());
    if (urls.empty()) {
      for (int i = 0; i < servers; ++i) {
        absl::StatusOr<std::unique_ptr<RedisProcess>> p = RedisProcess::Start();
        if (!p.ok()) return p.status();
        env->endpoints_.emplace_back("127.0.0.1", (*p)->port());
        Say(absl::StrCat("started redis-server on 127.0.0.1:", (*p)->port()));
        env->processes_.push_back(*std::move(p));
      }
    } else {
      if (static_cast<int>(urls.size()) < servers) {
        return absl::InvalidArgumentError(
            absl::StrCat("this example needs ", servers, " --redis servers"));
      }
      for (const std::string& url : urls) {
        absl::string_view rest = url;
        if (!absl::ConsumePrefix(&rest, "redis://")) {
          return absl::InvalidArgumentError(
              absl::StrCat("--redis wants redis://host:port, got ", url));
        }
        size_t colon = rest.rfind(':');
        int port = 6379;
        if (colon != absl::string_view::npos &&
            !absl::SimpleAtoi(rest.substr(colon + 1), &port)) {
          return absl::InvalidArgumentError(absl::StrCat("bad port in ", url));
        }
        env->endpoints_.emplace_back(std::string(rest.substr(0, colon)), port);
        env->processes_.push_back(nullptr);
      }
    }
    env->uv_loop_ = new uv_loop_t;
    uv_loop_init(env->uv_loop_);
    env->loop_ = std::make_unique<UvEventLoop>(env->uv_loop_);
    return std::unique_ptr<ExampleEnv>(std::move(env));
  }

  ~RealEnv() override {
    loop_.reset();
    if (uv_loop_ != nullptr) {
      uv_run(uv_loop_, UV_RUN_DEFAULT);
      int rc = uv_loop_close(uv_loop_);
      if (rc != 0) Say(absl::StrCat("warning: uv_loop_close: ", uv_strerror(rc)));
      delete uv_loop_;
    }
    for (auto& p : processes_) {
      if (p != nullptr) {
        Say(absl::StrCat("stopping redis-server on 127.0.0.1:", p->port()));
        p.reset();
      }
    }
  }

  EventLoop* loop() override { return loop_.get(); }
  size_t servers() const override { return endpoints_.size(); }
  std::string address(size_t i) const override {
    return absl::StrCat(endpoints_[i].first, ":", endpoints_[i].second);
  }

  std::unique_ptr<Transport> Connect(size_t i) override {
    HiredisTransportOptions o;
    o.host = endpoints_[i].first;
    o.port = endpoints_[i].second;
    o.connect_timeout = absl::Seconds(2);
    absl::StatusOr<std::unique_ptr<HiredisTransport>> t =
        HiredisTransport::Create(uv_loop_, o);
    if (!t.ok()) {
      Say(absl::StrCat("cannot create a connection: ", t.status().ToString()));
      return nullptr;
    }
    return *std::move(t);
  }

  bool RunUntil(absl::FunctionRef<bool()> done, absl::Duration timeout) override {
    bool timed_out = false;
    TimerId timer = loop_->RunAfter(timeout, [&timed_out] { timed_out = true; });
    while (!done() && !timed_out) {
      if (uv_run(uv_loop_, UV_RUN_ONCE) == 0) break;
    }
    loop_->Cancel(timer);
    return done();
  }

  absl::Status KillServer(size_t i) override {
    if (processes_[i] == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(address(i), " was given by --redis; not killing it"));
    }
    return processes_[i]->Kill();
  }

 private:
  RealEnv() = default;

  std::vector<std::unique_ptr<RedisProcess>> processes_;
  std::vector<std::pair<std::string, int>> endpoints_;
  uv_loop_t* uv_loop_ = nullptr;
  std::unique_ptr<EventLoop> loop_;
};

}  // namespace

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

bool RegisterFakeEnv(FakeEnvFactory factory) {
  FakeFactory() = std::move(factory);
  return true;
}

absl::StatusOr<std::unique_ptr<ExampleEnv>> ExampleEnv::Create(
    const std::vector<std::string>& urls, int servers, bool fake) {
  if (fake) {
    if (!FakeFactory()) {
      return absl::FailedPreconditionError(
          "this binary was built without the in-memory fake (dlock's fakes "
          "are testonly, so production binaries never link them); run the "
          "example's *_fake target instead, e.g. "
          "bazel run //examples:order_processing_fake -- --fake");
    }
    Say(absl::StrCat("using ", servers, " in-memory fake server(s) in virtual time"));
    return FakeFactory()(servers);
  }
  return RealEnv::Create(urls, servers);
}

}  // namespace examples
}  // namespace dlock
