// Integration into an existing libuv program. The host owns its uv_loop_t
// and already serves other work on it (here: a heartbeat timer standing in
// for request handling). dlock joins the same loop -- UvEventLoop and
// HiredisTransport over the host's loop, no thread of its own -- and the
// heartbeat keeps beating while the lock is acquired, held (renewed by the
// watchdog) and released. At the end the host closes its loop cleanly
// (uv_loop_close returns 0).
//
//   bazel run //examples:libuv_integration [-- --redis=redis://127.0.0.1:6379]
#include <uv.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dlock/testing/redis_process.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/watchdog/watchdog.h"

ABSL_FLAG(std::string, redis, "",
          "Redis server (host:port); default: start a private one");

namespace {

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The host's own work: a heartbeat every 10 ms.
struct Host {
  uv_loop_t loop;
  uv_timer_t heartbeat;
  int beats = 0;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::unique_ptr<dlock::test_support::RedisProcess> server;
  std::string host_name = "127.0.0.1";
  int port = 0;
  std::string flag = absl::GetFlag(FLAGS_redis);
  if (flag.empty()) {
    auto started = dlock::test_support::RedisProcess::Start();
    if (!started.ok()) {
      Say(started.status().ToString());
      return 1;
    }
    server = *std::move(started);
    port = server->port();
    Say(absl::StrCat("started redis-server on 127.0.0.1:", port));
  } else {
    size_t colon = flag.rfind(':');
    host_name = flag.substr(0, colon);
    port = std::stoi(flag.substr(colon + 1));
  }

  // --- the existing program: its loop and its own work ---
  Host host;
  uv_loop_init(&host.loop);
  uv_timer_init(&host.loop, &host.heartbeat);
  host.heartbeat.data = &host;
  uv_timer_start(&host.heartbeat, [](uv_timer_t* t) {
    static_cast<Host*>(t->data)->beats++;
  }, 10, 10);

  // --- dlock on the same loop ---
  bool ok = false;
  {
    dlock::UvEventLoop events(&host.loop);
    dlock::HiredisTransportOptions options;
    options.host = host_name;
    options.port = port;
    auto transport = dlock::HiredisTransport::Create(&host.loop, options);
    if (!transport.ok()) {
      Say(transport.status().ToString());
      return 1;
    }
    dlock::SimpleLock lock(&events, transport->get());
    dlock::Watchdog watchdog(&events, &lock);
    dlock::WatchHandle watch;
    int beats_at_acquire = 0;

    dlock::AcquireOptions ao;
    ao.ttl = absl::Milliseconds(300);
    auto h = lock.Acquire("cache-rebuild", ao, [&](absl::StatusOr<dlock::Lease> lease) {
      if (!lease.ok()) {
        Say(absl::StrCat("not acquired: ", lease.status().ToString()));
        uv_timer_stop(&host.heartbeat);
        return;
      }
      beats_at_acquire = host.beats;
      Say(absl::StrCat("lock acquired (fence ", lease->fence, ") after ", host.beats,
                       " heartbeats; holding it for 1s with a 300ms lease"));
      auto w = watchdog.Watch(*lease, {});
      if (w.ok()) watch = *std::move(w);
      events.RunAfter(absl::Seconds(1), [&] {
        Say(absl::StrCat("still valid after 1s: ", watch.IsValid() ? "yes" : "no",
                         "; heartbeats meanwhile: ", host.beats - beats_at_acquire));
        ok = watch.IsValid() && host.beats - beats_at_acquire >= 50;
        watch.Release([&](absl::Status s) {
          Say(absl::StrCat("released: ", s.ok() ? "OK" : s.ToString()));
          // The host decides when to stop its own work.
          uv_timer_stop(&host.heartbeat);
          (*transport)->Close();
        }).IgnoreError();
      });
    });
    if (!h.ok()) Say(h.status().ToString());
    // The host's usual loop: runs until no work is left.
    uv_run(&host.loop, UV_RUN_DEFAULT);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&host.heartbeat), nullptr);
  uv_run(&host.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&host.loop);
  Say(absl::StrCat("heartbeats in total: ", host.beats, "; uv_loop_close: ", rc));
  return ok && rc == 0 ? 0 : 1;
}
