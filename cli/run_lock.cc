#include "dlock/cli/run_lock.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/lock/replica_ack.h"

namespace dlock {
namespace cli {

absl::StatusOr<std::unique_ptr<RunLock>> RunLock::Build(Session& session,
                                                        const CommonOptions& common,
                                                        const RunOptions& run,
                                                        LockObserver* observer) {
  std::unique_ptr<RunLock> built(new RunLock(session, common, run, observer));
  absl::Status s = built->Build();
  if (!s.ok()) return s;
  return built;
}

RunLock::~RunLock() {
  // Outer wrappers before the locks they wrap.
  set_.reset();
  retry_.reset();
  fair_.reset();
  rw_.reset();
  semaphore_.reset();
  redlock_.reset();
}

// The lock of the run: one resource's, or a ResourceSetLock over the
// per-resource lock for several (all or nothing, renewed together by the
// one watch, its deadline the earliest of theirs).
absl::Status RunLock::Build() {
  if (run_.permits > 0) {
    BuildSemaphore();
    return absl::OkStatus();
  }
  if (s_.size() == 1 && run_.fair) {
    // Waits in its own queue (no RetryLock: its attempts would not queue).
    FairLockOptions o;
    SetLeaseOptions(o);
    fair_ = std::make_unique<FairLock>(s_.loop(), s_.transport(0), o);
    lock_ = fair_.get();
    return absl::OkStatus();
  }
  absl::Status s = BuildResourceLock();
  if (!s.ok() || run_.resources.size() <= 1) return s;
  set_ = std::make_unique<ResourceSetLock>(s_.loop(), lock_, run_.resources);
  lock_ = set_.get();
  return absl::OkStatus();
}

// One server: the read-write lock -- its reader with --shared, else its
// writer, which holds the plain lock's key (so it also excludes plain
// SimpleLock holders and older dlock runs) and excludes readers. Several
// servers: RedLock (no --shared, main.cc refuses it).
absl::Status RunLock::BuildResourceLock() {
  if (s_.size() != 1) return BuildRedLock();
  ReadWriteLockOptions o;
  SetLeaseOptions(o);
  o.replica_ack = ReplicaAck(run_.min_replicas, run_.min_replicas_timeout);
  rw_ = std::make_unique<ReadWriteLock>(s_.loop(), s_.transport(0), o);
  lock_ = run_.shared ? &rw_->reader() : &rw_->writer();
  // Woken by the view's release notifications (its channel, its transport).
  WrapInRetry();
  return absl::OkStatus();
}

absl::Status RunLock::BuildRedLock() {
  RedLockOptions o;
  o.keys.prefix = common_.prefix;
  o.observer = observer_;
  // One deployment-wide window (--restart-window), not one per --ttl:
  // every client must refuse a young server for as long as the longest
  // lease any client holds (main.cc refuses --ttl above the window).
  if (run_.restart_window > absl::ZeroDuration()) {
    o.max_ttl = run_.restart_window;
    o.restart_window = run_.restart_window;
  } else {
    o.delayed_restart = false;
    o.max_ttl = std::max(o.max_ttl, run_.ttl);
  }
  // Releases wait as long as any other Redis command (--timeout).
  o.release_timeout = common_.timeout;
  if (run_.wait == absl::ZeroDuration()) o.retry_count = 0;
  for (const RedisUrl& url : common_.urls) o.server_names.push_back(url.Display());
  absl::StatusOr<std::unique_ptr<RedLock>> lock =
      RedLock::Create(s_.loop(), s_.transports(), o);
  if (!lock.ok()) return lock.status();
  redlock_ = *std::move(lock);
  lock_ = redlock_.get();
  return absl::OkStatus();
}

// --permits N: one of N permits (a Semaphore; main.cc allows one server
// only), waited for like the lock. Everything after the acquire -- the
// process group, the watcher, the watchdog, --on-lost -- is the lock's.
void RunLock::BuildSemaphore() {
  SemaphoreOptions o;
  o.permits = run_.permits;
  SetLeaseOptions(o);
  semaphore_ = std::make_unique<Semaphore>(s_.loop(), s_.transport(0), o);
  lock_ = semaphore_.get();
  WrapInRetry();
}

void RunLock::SetLeaseOptions(LeaseOptions& o) const {
  o.key_prefix = common_.prefix;
  o.command_timeout = common_.timeout;
  o.observer = observer_;
  if (run_.restart_window_set) o.restart_window = run_.restart_window;
}

void RunLock::WrapInRetry() {
  if (run_.wait <= absl::ZeroDuration()) return;
  RetryLockOptions r;
  r.observer = observer_;
  retry_ = std::make_unique<RetryLock>(s_.loop(), lock_, r);
  lock_ = retry_.get();
}

}  // namespace cli
}  // namespace dlock
