// A consumer program built against @dlock: names the lock of each order with
// its own lock/ helpers and reports through dlock's TextLockObserver.
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "lock/lock.h"
#include "transport/transport.h"

int main() {
  dlock::TextLockObserver observer(
      [](absl::string_view line) { std::printf("%.*s\n", static_cast<int>(line.size()), line.data()); });
  dlock::AcquireEvent event;
  event.policy = "simple";
  std::string resource = consumer::OrderResource(42);
  event.resource = resource;
  event.attempts = 1;
  event.fence = 1;
  event.ttl = absl::Seconds(30);
  observer.OnAcquire(event);
  std::printf("%s\n", consumer::ShippingLabel({42, "rail"}).c_str());
  return 0;
}
