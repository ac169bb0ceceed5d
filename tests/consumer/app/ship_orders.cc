// A consumer program built against @dlock: ships order 42 under its lock on
// a real Redis server (`ship_orders <port>`, default 6379), on a libuv loop,
// reporting lock events through dlock's TextLockObserver.
#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "app/shipper.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

int main(int argc, char** argv) {
  dlock::HiredisTransportOptions options;
  options.port = argc > 1 ? std::atoi(argv[1]) : 6379;
  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc = 1;
  {
    dlock::UvEventLoop events(&loop);
    auto transport = dlock::HiredisTransport::Create(&loop, options);
    if (!transport.ok()) {
      std::fprintf(stderr, "%s\n", transport.status().ToString().c_str());
      return 1;
    }
    dlock::TextLockObserver observer([](absl::string_view line) {
      std::printf("%.*s\n", static_cast<int>(line.size()), line.data());
    });
    dlock::SimpleLockOptions lock_options;
    lock_options.observer = &observer;
    dlock::SimpleLock lock(&events, transport->get(), lock_options);
    consumer::Shipper shipper(&lock);
    shipper.Ship({42, "rail"}, [&](absl::Status s) {
      std::printf("ship order 42: %s\n", s.ToString().c_str());
      for (const std::string& label : shipper.shipped()) std::printf("%s\n", label.c_str());
      rc = s.ok() ? 0 : 1;
      (*transport)->Close();
    });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return rc;
}
