// This header defines `UvClients`: what every real-server test environment
// holds on the client side -- a UvTestLoop, the UvEventLoop over it, and the
// transports the test connected on it -- and runs a lock's acquire or
// release on that loop to completion. Close() (or the destructor) closes
// every transport and checks that the loop then closes clean: a handle left
// open by a transport is a test failure.
//
// Not thread-safe: call only on the test's thread, which runs the loop.
#ifndef DLOCK_TESTS_ENV_UV_CLIENTS_H_
#define DLOCK_TESTS_ENV_UV_CLIENTS_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace test_support {

class UvClients {
 public:
  UvClients() : loop_(std::make_unique<UvEventLoop>(uv_.get())) {}
  UvClients(const UvClients&) = delete;
  UvClients& operator=(const UvClients&) = delete;
  ~UvClients() { Close(); }

  EventLoop* loop() { return loop_.get(); }
  uv_loop_t* uv_loop() { return uv_.get(); }
  UvTestLoop& uv() { return uv_; }

  bool RunUntil(const std::function<bool()>& done,
                absl::Duration limit = absl::Seconds(10)) {
    return uv_.RunUntil(done, limit);
  }
  void RunFor(absl::Duration d) { uv_.RunFor(d); }

  // Keeps a transport just created and waits (bounded by `timeout`) until it
  // connected, so a test measures its subject, not connects. A failed
  // creation or connect is a test failure; the first returns nullptr.
  template <typename T>
  T* Connect(absl::StatusOr<std::unique_ptr<T>> created,
             absl::Duration timeout = absl::Seconds(10)) {
    T* t = Keep(std::move(created));
    if (t == nullptr) return nullptr;
    absl::Status up = uv_.ConnectAndWait(*t, timeout);
    EXPECT_TRUE(up.ok()) << up;
    return t;
  }

  // Keeps a transport just created without connecting it. nullptr (and a
  // test failure) if the creation failed.
  template <typename T>
  T* Keep(absl::StatusOr<std::unique_ptr<T>> created) {
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return nullptr;
    T* t = created->get();
    clients_.push_back(*std::move(created));
    return t;
  }

  // A connected HiredisTransport with `options` (host and port included).
  HiredisTransport* Hiredis(const HiredisTransportOptions& options) {
    return Connect(HiredisTransport::Create(uv_.get(), options));
  }
  // A connected HiredisTransport to 127.0.0.1:`port`.
  HiredisTransport* Hiredis(int port) {
    HiredisTransportOptions options;
    options.port = port;
    return Hiredis(options);
  }

  // Runs `lock.Acquire(resource, options)` on this loop until it calls
  // back, for at most `limit` (a test failure past it): its result, or the
  // call's own refusal.
  absl::StatusOr<Lease> Acquire(Lock& lock, absl::string_view resource,
                                const AcquireOptions& options,
                                absl::Duration limit = absl::Seconds(10)) {
    bool done = false;
    absl::StatusOr<Lease> out = absl::UnknownError("pending");
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire(resource, options, [&](absl::StatusOr<Lease> l) {
          out = std::move(l);
          done = true;
        });
    if (!h.ok()) return h.status();
    EXPECT_TRUE(RunUntil([&] { return done; }, limit));
    return out;
  }

  // The same for `lock.Release(lease)`.
  absl::Status Release(Lock& lock, const Lease& lease,
                       absl::Duration limit = absl::Seconds(10)) {
    bool done = false;
    absl::Status out = absl::UnknownError("pending");
    absl::Status s = lock.Release(lease, [&](absl::Status st) {
      out = st;
      done = true;
    });
    if (!s.ok()) return s;
    EXPECT_TRUE(RunUntil([&] { return done; }, limit));
    return out;
  }

  // Closes every transport, then the event loop, and expects the uv loop
  // to close with nothing leaked. Idempotent.
  void Close() {
    if (closed_) return;
    closed_ = true;
    for (auto& c : clients_) c->Close();
    clients_.clear();
    loop_.reset();
    // Every handle closed: nothing leaked on the loop.
    EXPECT_EQ(uv_.Close(), 0);
  }

 private:
  UvTestLoop uv_;
  std::unique_ptr<UvEventLoop> loop_;
  std::vector<std::unique_ptr<Transport>> clients_;
  bool closed_ = false;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_UV_CLIENTS_H_
