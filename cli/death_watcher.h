// This header defines `DeathWatcher`: a process forked by dlock that stops
// the command's process group if dlock itself dies (SIGKILL, crash), since
// nobody renews the lease then.
//
// It runs outside the command's group and holds the read end of a pipe
// whose write end only dlock has. dlock writes each new lease deadline
// (CLOCK_MONOTONIC ns, the UvEventLoop clock) after every successful
// renewal, and "done" once the group is gone, before it reaps the command
// (so the group id cannot have been reused) and exits. EOF without "done"
// means dlock died: the watcher sends the --on-lost signal to the group,
// then SIGKILL at
//   min(death + --kill-after, lease deadline - ttl/10)
// so the group is dead before the lease (which nobody renews now) can
// expire on the server. The lease deadline is already earlier than the
// server-side expiry (counted from when the extend was sent, minus the
// drift allowance). With renewal every ttl/3, a dlock that died while its
// renewals succeeded leaves at least ~2/3 ttl, so the group gets SIGKILL at
// the latest ~0.57 ttl after dlock's death (and ~0.1 ttl before the
// deadline).
//
// Residual window: a watcher killed together with dlock (SIGKILL to dlock's
// own process group, the OOM killer) signals nothing; the direct child
// still gets the --on-lost signal by PR_SET_PDEATHSIG.
//
// Thread-compatible; dlock calls it from its loop's thread only.
#ifndef DLOCK_CLI_DEATH_WATCHER_H_
#define DLOCK_CLI_DEATH_WATCHER_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/time/time.h"
#include "dlock/lock/lock.h"

namespace dlock {
namespace cli {

class DeathWatcher {
 public:
  // Forks the watcher for group `pgid`: on dlock's death it sends
  // `first_signal`, then SIGKILL after `kill_after` (or before `lease`'s
  // deadline, whichever is first). `first_signal` 0 (--on-lost=ignore):
  // no watcher. If the pipe or the fork fails, says so on stderr and runs
  // without one.
  void Start(pid_t pgid, int first_signal, absl::Duration kill_after, const Lease& lease);
  // After a renewal: the lease's new local deadline (UvEventLoop clock).
  void Renewed(absl::Time deadline);
  // The group is gone: the watcher must never signal its id again, and
  // exits. Call before reaping the group's leader. Idempotent.
  void Stop();
  // Reaps the watcher if it has exited (call on SIGCHLD).
  void Reap();

 private:
  void Send(int64_t msg);

  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_DEATH_WATCHER_H_
