// `dlock run RESOURCE -- CMD...`: acquire, run CMD while the watchdog renews
// the lease, release when CMD's process group has exited. Everything runs on
// one libuv loop: the lock's commands, the watchdog's timers, the child's
// exit and the signals forwarded to it. `Runner` below is the run's state
// machine; each mechanism has its own place:
//
//   run_lock.h       which lock (RunLock: RW writer/reader, fair, semaphore,
//                    RedLock, several resources)
//   run_lease.h      acquire, renewal by the watchdog, release (RunLease)
//   command_env.h    DLOCK_RESOURCE / DLOCK_FENCE / DLOCK_FENCES
//   command_group.h  CMD's process group: SIGCHLD, /proc poll, --kill-after
//   process_group.h  fork + setpgid + execvp; is any of the group alive
//   terminal.h       the terminal handed to the group and back
//   death_watcher.h  stops the group if dlock itself dies
//   signal_watch.h   SIGINT/SIGTERM/SIGHUP/SIGQUIT (and SIGCHLD) on the loop
//   run_exit.h       what happened -> exit code (and dying of ^C)
//
// CMD runs in a process group of its own, and every signal dlock sends goes
// to that whole group, so a script's background jobs and subprocesses are
// covered too. The lock is held (and renewed) until every process of the
// group has exited; only then is it released and does dlock exit. If dlock
// itself dies (SIGKILL, crash), nobody renews the lease: the direct child
// gets the --on-lost signal by PR_SET_PDEATHSIG, and the DeathWatcher
// signals the whole group and SIGKILLs it before the lease's deadline.
// --on-lost=ignore: neither (the command may run on unprotected).
//
//   state      | event                       | action
//   -----------+-----------------------------+-----------------------------
//   acquiring  | lease                       | spawn CMD, start the watch
//              | busy / wait over            | exit 75
//              | unavailable                 | exit 69
//              | SIGINT/SIGTERM/SIGHUP       | cancel (releases what it took),
//              |                             | exit 128+N
//   running    | CMD's group has exited      | release; once every server's
//              |                             | release was answered (RedLock
//              |                             | reports at quorum) or after
//              |                             | --timeout, exit CMD's status
//              | lease lost                  | signal the group per --on-lost
//              |                             | (SIGKILL after --kill-after);
//              |                             | once it is gone, exit 79
//              | SIGINT/SIGTERM/SIGHUP/QUIT  | forwarded to the group;
//              |                             | SIGKILL after --kill-after
//
// Kinds of run (one server): without --shared the run is EXCLUSIVE -- the
// read-write lock's writer (lock/read_write_lock.h), which holds the plain
// lock's key, so it excludes other exclusive runs, SimpleLock holders AND
// --shared runs, and while it waits keeps new --shared runs out. With
// --shared it is a reader: --shared runs of a resource overlap. Several
// RESOURCEs: all of them or none (ResourceSetLock: sorted order, released
// on any failure, renewed together, the watcher's deadline the earliest
// lease's).
#include <signal.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "dlock/cli/command_env.h"
#include "dlock/cli/command_group.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/run_exit.h"
#include "dlock/cli/run_lease.h"
#include "dlock/cli/run_lock.h"
#include "dlock/cli/run_observer.h"
#include "dlock/cli/session.h"
#include "dlock/cli/signal_watch.h"
#include "dlock/lock/lock.h"

extern char** environ;

namespace dlock {
namespace cli {
namespace {

class Runner {
 public:
  Runner(Session& session, const CommonOptions& common, const RunOptions& run)
      : s_(session), common_(common), run_(run), observer_(common.verbose, run.resource) {
    // The renewed lease is adopted by the watchdog after it reports the
    // renewal: read its deadline on the next turn.
    observer_.on_renewed = [this] {
      s_.loop()->RunAfter(absl::ZeroDuration(), [this] { OnRenewed(); });
    };
  }

  ~Runner() {
    group_.reset();  // gives the terminal back
    // Lock objects before the transports (the Session's); their pending
    // callbacks are delivered as kCancelled while the loop runs dry.
    lease_.reset();
    // What destroying them sent (e.g. a cancelled acquire's release), within
    // what is left of Run's drain bound; observer_, which their operations
    // still report to, lives until this body returns.
    s_.DrainCommands(common_.timeout);
  }

  // The signal dlock should die of after cleaning up, or 0 (run_exit.h).
  int ReraiseSignal() const { return SignalToReraise(interrupted_by_, exit_code_); }

  int Run() {
    absl::StatusOr<std::unique_ptr<RunLock>> lock =
        RunLock::Build(s_, common_, run_, &observer_);
    // A configuration the lock refuses (e.g. RedLock given the same Redis
    // instance twice: kInvalidArgument) is a usage error.
    if (!lock.ok()) return ExitForRefusedSetup(lock.status());
    lease_ = std::make_unique<RunLease>(s_.loop(), *std::move(lock), &observer_);
    signals_.Start(s_.uv_loop(), {SIGINT, SIGTERM, SIGHUP, SIGQUIT},
                   [this](int signum) { OnSignal(signum); });
    AcquireOptions options;
    options.ttl = run_.ttl;
    options.wait = run_.wait;
    absl::Status started = lease_->Acquire(
        run_.resource, options,
        [this](absl::StatusOr<Lease> lease) { OnAcquired(std::move(lease)); });
    if (!started.ok()) {
      signals_.Stop();
      return ExitForRefusedSetup(started);
    }
    s_.RunUntil([this] { return done_; });
    // Release (RedLock) reports at quorum, and a cancelled acquire releases
    // in the background: let every server's release, a re-send after NOSCRIPT
    // and any late grant's re-release finish before the process exits, with
    // the lock objects still alive to send them -- bounded by the release
    // timeout (--timeout). What is left then (a server down or silent)
    // expires with its TTL. ~Runner drains again, within the same bound,
    // what destroying the lock objects sends.
    s_.DrainCommands(common_.timeout);
    return exit_code_;
  }

 private:
  bool running() const { return group_ != nullptr && group_->running(); }

  void OnAcquired(absl::StatusOr<Lease> lease) {
    if (finishing_) return;
    if (!lease.ok()) {
      return Finish(ExitForAcquireFailure(lease.status(), observer_.last_wait_error(),
                                          common_, run_));
    }
    Spawn();
  }

  void Spawn() {
    const Lease& lease = lease_->lease();
    group_ = std::make_unique<CommandGroup>(s_.loop(), s_.uv_loop(), run_.kill_after,
                                            [this](int status) { OnGroupExit(status); });
    const int failed = group_->Start(
        run_.command, CommandEnvironment(environ, lease, lease_->SetFences()), OnLostSignal(),
        lease);
    if (failed != 0) return ReleaseThenFinish(failed);
    if (common_.verbose) {
      std::fprintf(stderr,
                   "dlock: holding \"%s\" (fence %lld); running %s (pid %d, process group "
                   "%d)\n",
                   absl::CEscape(lease.resource).c_str(), static_cast<long long>(lease.fence),
                   run_.command[0].c_str(), static_cast<int>(group_->pgid()),
                   static_cast<int>(group_->pgid()));
    }
    absl::Status watched = lease_->Watch([this](absl::Status why) { OnLost(std::move(why)); });
    if (!watched.ok()) OnLost(watched);
  }

  // The signal for the command on a lost lease (and dlock's death): SIGTERM,
  // SIGKILL, or 0 for --on-lost=ignore.
  int OnLostSignal() const {
    return run_.on_lost == OnLost::kTerm   ? SIGTERM
           : run_.on_lost == OnLost::kKill ? SIGKILL
                                           : 0;
  }

  // After a renewal: tell the watcher the new deadline.
  void OnRenewed() {
    if (group_ == nullptr || lease_ == nullptr) return;
    if (std::optional<absl::Time> deadline = lease_->WatchedDeadline()) {
      group_->Renewed(*deadline);
    }
  }

  void OnLost(absl::Status why) {
    if (lost_) return;
    lost_ = true;
    const char* action = "letting it finish (--on-lost=ignore)";
    if (running()) {
      if (run_.on_lost == OnLost::kTerm) {
        action = "sending SIGTERM to the command's process group";
        group_->Signal(SIGTERM);
        group_->ArmKillTimer();
      } else if (run_.on_lost == OnLost::kKill) {
        action = "sending SIGKILL to the command's process group";
        group_->Signal(SIGKILL);
      }
    }
    std::fprintf(stderr, "dlock: lock \"%s\" lost (%s); %s\n",
                 absl::CEscape(run_.resource).c_str(), why.ToString().c_str(), action);
  }

  void OnGroupExit(int status) {
    if (common_.verbose) {
      std::fprintf(stderr, "dlock: command exited with status %d; its process group is gone\n",
                   status);
    }
    ReleaseThenFinish(lost_ ? kExitLost : status);
  }

  void ReleaseThenFinish(int code) {
    pending_code_ = code;
    lease_->Release([this](absl::Status st) { OnReleased(st); });
  }

  void OnReleased(const absl::Status& status) {
    if (!status.ok() && !lost_) {
      // The lease was ours until now: say why the release failed (the key
      // still expires by its TTL).
      std::fprintf(stderr, "dlock: release of \"%s\": %s\n",
                   absl::CEscape(run_.resource).c_str(), status.ToString().c_str());
    }
    Finish(pending_code_);
  }

  void Finish(int code) {
    if (done_) return;
    finishing_ = true;
    exit_code_ = code;
    signals_.Stop();
    done_ = true;
  }

  void OnSignal(int signum) {
    if (signum == SIGINT || signum == SIGQUIT) interrupted_by_ = signum;
    if (running()) {
      // Forwarded to the whole group; its exit ends the run. Whatever is
      // left of the group after --kill-after gets SIGKILL (a script's
      // background jobs ignore SIGINT and SIGQUIT).
      group_->Signal(signum);
      group_->ArmKillTimer();
      return;
    }
    if (!finishing_) {
      // Still acquiring: give up; whatever was taken is released.
      finishing_ = true;
      lease_->CancelAcquire();
      std::fprintf(stderr, "dlock: interrupted by signal %d while acquiring\n", signum);
      Finish(128 + signum);
    }
  }

  Session& s_;
  const CommonOptions& common_;
  const RunOptions& run_;
  RunObserver observer_;
  std::unique_ptr<RunLease> lease_;
  std::unique_ptr<CommandGroup> group_;
  SignalWatch signals_;
  int interrupted_by_ = 0;  // SIGINT or SIGQUIT received by dlock, or 0
  bool lost_ = false;
  bool finishing_ = false;
  bool done_ = false;
  int pending_code_ = 0;
  int exit_code_ = kExitInternal;
};

}  // namespace

int RunCommand(const CommonOptions& common, const RunOptions& run) {
  int code = kExitOk;
  std::unique_ptr<Session> session = OpenForCommand(common, &code);
  if (session == nullptr) return code;
  int reraise;
  {
    Runner runner(*session, common, run);
    code = runner.Run();
    reraise = runner.ReraiseSignal();
  }
  if (reraise != 0) {
    session.reset();  // closes the connections and the loop
    DieOfSignal(reraise);
  }
  return code;
}

}  // namespace cli
}  // namespace dlock
