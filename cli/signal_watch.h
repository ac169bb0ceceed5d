// This header defines `SignalWatch`: signals delivered as calls on a libuv
// loop (uv_signal handles), as `dlock run` takes SIGINT/SIGTERM/SIGHUP/
// SIGQUIT (to forward them) and SIGCHLD (to see its command stop or exit).
//
// Not thread-safe: call only on the thread running `loop`; the handler runs
// there too.
#ifndef DLOCK_CLI_SIGNAL_WATCH_H_
#define DLOCK_CLI_SIGNAL_WATCH_H_

#include <functional>
#include <initializer_list>
#include <vector>

struct uv_loop_s;
struct uv_signal_s;

namespace dlock {
namespace cli {

class SignalWatch {
 public:
  SignalWatch() = default;
  // Stops watching (as Stop).
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // From now on each of `signals` calls `handler(signum)` on `loop`'s
  // thread instead of its default action. At most once between Stops.
  void Start(uv_loop_s* loop, std::initializer_list<int> signals,
             std::function<void(int)> handler);
  // The signals are no longer watched (their handles close on the loop's
  // next turn). Idempotent.
  void Stop();
  bool active() const { return !handles_.empty(); }

 private:
  static void OnSignal(uv_signal_s* handle, int signum);

  std::function<void(int)> handler_;
  std::vector<uv_signal_s*> handles_;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_SIGNAL_WATCH_H_
