// This header defines `RunObserver`, what `dlock run` tells the user about
// its lock: a wait is always announced (the user should know why nothing
// happens); with --verbose every event of the lock and the watchdog is
// printed too.
//
// Not thread-safe: the lock and the watchdog report on the loop's thread.
#ifndef DLOCK_CLI_RUN_OBSERVER_H_
#define DLOCK_CLI_RUN_OBSERVER_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dlock/lock/observer.h"

namespace dlock {
namespace cli {

// Prints "dlock: LINE" on stderr.
void PrintLine(absl::string_view line);

class RunObserver : public LockObserver {
 public:
  // `resource`: the lock's name in the wait message.
  RunObserver(bool verbose, std::string resource);

  // The error of the latest failed attempt while waiting (OK before any).
  const absl::Status& last_wait_error() const { return last_wait_error_; }

  // Called after each successful renewal (from the watchdog's callback).
  std::function<void()> on_renewed;

  void OnAcquireWait(const AcquireWaitEvent& e) override;
  void OnAcquire(const AcquireEvent& e) override;
  void OnRelease(const ReleaseEvent& e) override;
  void OnExtend(const ExtendEvent& e) override;
  void OnRenewal(const RenewalEvent& e) override;
  void OnLeaseLost(const LeaseLostEvent& e) override;
  void OnServerVote(const ServerVoteEvent& e) override;

 private:
  const bool verbose_;
  const std::string resource_;
  TextLockObserver text_;
  bool announced_ = false;
  absl::Status last_wait_error_;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_RUN_OBSERVER_H_
