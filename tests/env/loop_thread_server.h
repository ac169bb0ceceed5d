// This header defines `LoopThreadServer`: what the real-server tests of the
// threaded facades (BlockingLock, with and without renewal) share -- one
// private redis-server, a UvLoopThread, and on that thread a HiredisTransport
// connected to the server -- and `RunOnLoop`, which runs a function on a
// loop thread and waits for it.
//
// Loop-bound objects (the transport, the policies a test makes over it) are
// created and destroyed on the loop thread: a fixture builds its policies in
// `Run` after `Start`, and hands their destruction to `Stop`.
//
// Not thread-safe: call on the test's thread; `loop()` and `transport()`
// only inside `Run`.
#ifndef DLOCK_TESTS_ENV_LOOP_THREAD_SERVER_H_
#define DLOCK_TESTS_ENV_LOOP_THREAD_SERVER_H_

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"

namespace dlock {
namespace test_support {

// Runs `fn` on `thread`'s loop thread and waits for it to return. A Post
// the thread refuses is a fatal test failure.
template <typename Fn>
void RunOnLoop(LoopThread& thread, Fn fn) {
  std::promise<void> done;
  ASSERT_TRUE(thread.Post([&] {
    fn();
    done.set_value();
  }));
  done.get_future().wait();
}

class LoopThreadServer {
 public:
  LoopThreadServer() = default;
  LoopThreadServer(const LoopThreadServer&) = delete;
  LoopThreadServer& operator=(const LoopThreadServer&) = delete;
  ~LoopThreadServer() { Stop([] {}); }

  // Starts the server and the loop thread, and connects the transport on
  // it. A failure is a fatal test failure: call it as
  // ASSERT_NO_FATAL_FAILURE(env.Start()).
  void Start() {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    thread_ = std::make_unique<UvLoopThread>();
    Run([this] {
      HiredisTransportOptions options;
      options.port = server_->port();
      absl::StatusOr<std::unique_ptr<HiredisTransport>> t =
          HiredisTransport::Create(thread_->uv_loop(), options);
      ASSERT_THAT(t, IsOk());
      transport_ = *std::move(t);
    });
    ASSERT_NE(transport_, nullptr);
  }

  // Resumes the server if a test left it paused.
  void ResumeIfPaused() {
    if (server_ != nullptr && server_->paused()) {
      EXPECT_THAT(server_->Resume(), IsOk());
    }
  }

  // Resumes a paused server; on the loop thread runs `destroy` (the test's
  // loop-bound objects, which may use the transport) and destroys the
  // transport; then stops the loop thread. Idempotent.
  void Stop(absl::FunctionRef<void()> destroy) {
    ResumeIfPaused();
    if (thread_ == nullptr) return;
    Run([&] {
      destroy();
      transport_.reset();
    });
    thread_.reset();
  }

  // Runs `fn` on the loop thread and waits for it.
  template <typename Fn>
  void Run(Fn fn) {
    RunOnLoop(*thread_, std::move(fn));
  }

  // A command sent straight to the server (not through the loop thread);
  // a failure is a test failure and an error reply.
  Reply Server(std::vector<std::string> argv) {
    absl::StatusOr<Reply> r = server_->Command(std::move(argv));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : Reply::Error(r.status().ToString());
  }

  RedisServer& server() { return *server_; }
  UvLoopThread* thread() { return thread_.get(); }
  EventLoop* loop() { return thread_->loop(); }
  HiredisTransport* transport() { return transport_.get(); }

 private:
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<UvLoopThread> thread_;
  std::unique_ptr<HiredisTransport> transport_;  // loop thread only
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_LOOP_THREAD_SERVER_H_
