// Quick start for a program that owns its libuv loop: everything runs on
// this one thread inside uv_run, driven by callbacks. A SimpleLock takes the
// lock, a Watchdog renews it while timed work runs on the loop, then the
// lock is released and the loop closed cleanly.
//
//   bazel run //client:quickstart_async -- --redis=redis://127.0.0.1:6379
#include <uv.h>

#include <functional>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/watchdog/watchdog.h"

ABSL_FLAG(std::string, redis, "redis://127.0.0.1:6379",
          "Redis server URL (redis://[[user]:password@]host[:port][/db], "
          "rediss://... for TLS, or unix://path)");
ABSL_FLAG(std::string, tls_ca_cert, "",
          "rediss://: CA file the server certificate must chain to (default: "
          "the system's CAs)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto url = dlock::ParseRedisUrl(absl::GetFlag(FLAGS_redis));
  if (!url.ok()) { std::cerr << "--redis: " << url.status() << "\n"; return 2; }
  uv_loop_t uv;
  uv_loop_init(&uv);
  bool ok = false;
  {
    // The connection (it starts connecting at once) and dlock's timers/clock.
    // The transport the URL names (plain or TLS; host:port or unix socket,
    // AUTH, db).
    dlock::TlsOptions tls;
    tls.ca_file = absl::GetFlag(FLAGS_tls_ca_cert);
    dlock::UvTransportOptions options = dlock::TransportOptionsForUrl(*url, tls);
    options.connection.connect_timeout = absl::Seconds(3);
    auto transport = dlock::UvTransport::Create(&uv, options);
    if (!transport.ok()) {
      std::cerr << transport.status() << "\n";
      uv_loop_close(&uv);
      return 2;
    }
    dlock::UvEventLoop loop(&uv);
    dlock::SimpleLock lock(&loop, transport->get());
    dlock::Watchdog watchdog(&loop, &lock);  // renews watched leases
    dlock::WatchHandle watch;
    std::function<void(int)> work;
    auto done = [&](const char* what, absl::Status s) {  // the end: free the loop
      std::cout << what << ": " << s << "\n";
      (*transport)->Close();  // once closed, the loop runs dry and uv_run returns
    };
    // 1. Acquire with a 1 s TTL (one attempt).
    dlock::AcquireOptions acquire;
    acquire.ttl = absl::Seconds(1);
    auto acquired = lock.Acquire("quickstart/async", acquire, [&](auto lease) {
      if (!lease.ok()) return done("acquire failed", lease.status());
      std::cout << "locked quickstart/async, fence " << lease->fence << "\n";
      // 2. Watch it: renewed every ttl/3; on_lost says when we must stop.
      dlock::WatchOptions w;
      w.on_lost = [&](absl::Status why) { done("LOST the lock", why); };
      auto watched = watchdog.Watch(*lease, std::move(w));
      if (!watched.ok()) return done("watch failed", watched.status());
      watch = *std::move(watched);
      loop.RunAfter(absl::Milliseconds(400), [&] { work(1); });
    });
    // 3. Work in 5 steps of 400 ms (timers on the loop): 2 s, twice the TTL.
    work = [&](int step) {
      if (watch.lost()) return;  // on_lost has already ended the program
      std::cout << "step " << step << ": held " << step * 400 << " ms with a 1 s TTL, valid "
                << absl::Trunc(watch.lease().deadline - loop.Now(), absl::Milliseconds(1))
                << " more\n";
      if (step < 5) {
        loop.RunAfter(absl::Milliseconds(400), [&, step] { work(step + 1); });
        return;
      }
      // 4. Stop renewing and release.
      absl::Status sent = watch.Release([&](absl::Status s) {
        ok = s.ok();
        done("released", s);
      });
      if (!sent.ok()) done("release rejected", sent);
    };
    if (!acquired.ok()) done("acquire rejected", acquired.status());
    uv_run(&uv, UV_RUN_DEFAULT);
  }  // destroys watch, watchdog, lock, loop and transport ...
  uv_run(&uv, UV_RUN_DEFAULT);  // ... let libuv deliver their close callbacks
  int closed = uv_loop_close(&uv);
  std::cout << "uv_loop_close: " << closed << "\n";
  return ok && closed == 0 ? 0 : 1;
}
