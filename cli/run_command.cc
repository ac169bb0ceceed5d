// `dlock run RESOURCE -- CMD...`: acquire, run CMD while the watchdog renews
// the lease, release when CMD's process group has exited. Everything runs on
// one libuv loop: the lock's commands, the watchdog's timers, the child's
// exit (a uv_signal watcher on SIGCHLD, waitid, and a /proc poll for the
// rest of its group) and the signals forwarded to it.
//
// CMD runs in a process group of its own (fork + setpgid + execvp rather
// than uv_spawn), and every signal dlock sends goes to that whole group, so
// a script's background jobs and subprocesses are covered too. The lock is
// held (and renewed) until every process of the group has exited; only then
// is it released and does dlock exit.
//
// If dlock itself dies (SIGKILL, crash), nobody renews the lease: the
// direct child gets the --on-lost signal by PR_SET_PDEATHSIG, and a watcher
// process (see StartWatcher) signals the whole group and SIGKILLs it before
// the lease's deadline. --on-lost=ignore: neither (the command may run on
// unprotected).
//
// Residual windows (README): a process that leaves the group (setsid,
// setpgid, a daemon) is not signalled and not waited for; if the watcher is
// killed together with dlock (SIGKILL to dlock's own process group, the OOM
// killer) only the direct child is signalled; a process in uninterruptible
// sleep dies only when it wakes.
//
// Terminal: when dlock is a job of an interactive shell (it leads its
// process group, the terminal's foreground group), the command's group is
// made the foreground group (tcsetpgrp) until the direct child exits, so it
// can read the terminal and ^C / ^Z reach it; a stopped command stops dlock
// too (job control works as for any command). Elsewhere (dlock inside a
// script run from a terminal) the terminal stays with dlock's group -- a ^C
// interrupts the script, and dlock forwards it -- unless the command stops
// on SIGTTIN/SIGTTOU (it reads the terminal or sets its modes): then the
// terminal is handed to it as well.
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
// CMD gets DLOCK_RESOURCE and DLOCK_FENCE (the lease's fencing token) in its
// environment, so it can hand the fence to the resource it protects.
//
// Kinds of run (one server): without --shared the run is EXCLUSIVE -- the
// read-write lock's writer (lock/read_write_lock.h), which holds the plain
// lock's key, so it excludes other exclusive runs, SimpleLock holders AND
// --shared runs, and while it waits keeps new --shared runs out. With
// --shared it is a reader: --shared runs of a resource overlap. Several
// RESOURCEs: all of them or none (ResourceSetLock: sorted order, released
// on any failure, renewed together, the watcher's deadline the earliest
// lease's); DLOCK_RESOURCE is their sorted list joined by ',', DLOCK_FENCE
// the first one's fence and DLOCK_FENCES every fence in that order.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/reply_status.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/redlock/redlock.h"
#include "dlock/watchdog/watchdog.h"

extern char** environ;

namespace dlock {
namespace cli {
namespace {

void PrintLine(absl::string_view line) {
  std::fprintf(stderr, "dlock: %.*s\n", static_cast<int>(line.size()), line.data());
}

// Reports waits (always: the user should know why nothing happens) and,
// with --verbose, every event of the lock and the watchdog.
class CliObserver : public LockObserver {
 public:
  CliObserver(bool verbose, std::string resource)
      : verbose_(verbose), resource_(std::move(resource)), text_(PrintLine) {}

  const absl::Status& last_wait_error() const { return last_wait_error_; }

  // Called after each successful renewal (from the watchdog's callback).
  std::function<void()> on_renewed;

  void OnAcquireWait(const AcquireWaitEvent& e) override {
    last_wait_error_ = e.last_error;
    if (!announced_) {
      announced_ = true;
      std::string why = absl::IsAborted(e.last_error)
                            ? "held by another owner"
                            : absl::StrCat("last attempt: ", e.last_error.ToString());
      std::fprintf(stderr, "dlock: waiting up to %s for lock \"%s\" (%s)\n",
                   absl::FormatDuration(e.wait_left).c_str(),
                   absl::CEscape(resource_).c_str(), why.c_str());
    }
    if (verbose_) text_.OnAcquireWait(e);
  }
  void OnAcquire(const AcquireEvent& e) override {
    if (verbose_) text_.OnAcquire(e);
  }
  void OnRelease(const ReleaseEvent& e) override {
    if (verbose_) text_.OnRelease(e);
  }
  void OnExtend(const ExtendEvent& e) override {
    if (verbose_) text_.OnExtend(e);
  }
  void OnRenewal(const RenewalEvent& e) override {
    if (e.status.ok() && on_renewed) on_renewed();
    if (verbose_) text_.OnRenewal(e);
  }
  void OnLeaseLost(const LeaseLostEvent& e) override {
    if (verbose_) text_.OnLeaseLost(e);
  }
  void OnServerVote(const ServerVoteEvent& e) override {
    if (verbose_) text_.OnServerVote(e);
  }

 private:
  const bool verbose_;
  const std::string resource_;
  TextLockObserver text_;
  bool announced_ = false;
  absl::Status last_wait_error_;
};

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

class Runner {
 public:
  Runner(Session& session, const CommonOptions& common, const RunOptions& run)
      : s_(session),
        common_(common),
        run_(run),
        observer_(common.verbose, run.resource) {
    // The renewed lease is adopted by the watchdog after it reports the
    // renewal: read its deadline on the next turn.
    observer_.on_renewed = [this] {
      s_.loop()->RunAfter(absl::ZeroDuration(), [this] { OnRenewed(); });
    };
  }

  ~Runner() {
    TakeTerminalBack();
    // Lock objects before the transports (the Session's); their pending
    // callbacks are delivered as kCancelled while the loop runs dry.
    watch_ = WatchHandle();
    watchdog_.reset();
    set_.reset();
    retry_.reset();
    fair_.reset();
    rw_.reset();
    semaphore_.reset();
    redlock_.reset();
    // What destroying them sent (e.g. a cancelled acquire's release), within
    // what is left of Run's drain bound; observer_, which their operations
    // still report to, lives until this body returns.
    s_.DrainCommands(common_.timeout);
  }

  // The signal dlock should die of after cleaning up, or 0: when dlock got
  // a SIGINT/SIGQUIT (a ^C to a script's process group) and the run ended
  // with 128+that signal, dying of it (rather than exiting 130) tells a
  // calling shell script the user interrupted, so it stops too -- the
  // convention shells expect of any command.
  int ReraiseSignal() const {
    return interrupted_by_ != 0 && exit_code_ == 128 + interrupted_by_ ? interrupted_by_ : 0;
  }

  int Run() {
    absl::Status built = BuildLock();
    if (!built.ok()) {
      // A configuration the lock refuses (e.g. RedLock given the same Redis
      // instance twice: kInvalidArgument) is a usage error.
      PrintLine(built.ToString());
      const int code = ExitCodeForStatus(built);
      return code == kExitInternal ? kExitUsage : code;
    }
    StartSignals();
    AcquireOptions options;
    options.ttl = run_.ttl;
    options.wait = run_.wait;
    acquire_start_ = s_.loop()->Now();
    absl::StatusOr<AcquireHandle> handle = lock_->Acquire(
        run_.resource, options,
        [this](absl::StatusOr<Lease> lease) { OnAcquired(std::move(lease)); });
    if (!handle.ok()) {
      PrintLine(handle.status().ToString());
      StopSignals();
      const int code = ExitCodeForStatus(handle.status());
      return code == kExitInternal ? kExitUsage : code;
    }
    acquire_ = *handle;
    s_.RunUntil([this] { return done_; });
    // Release (RedLock) reports at quorum, and a cancelled acquire releases
    // in the background: let every server's release, its NOSCRIPT fallback
    // and any late grant's re-release finish before the process exits, with
    // the lock objects still alive to send them -- bounded by the release
    // timeout (--timeout). What is left then (a server down or silent)
    // expires with its TTL. ~Runner drains again, within the same bound,
    // what destroying the lock objects sends.
    s_.DrainCommands(common_.timeout);
    return exit_code_;
  }

 private:
  // The lock of the run: one resource's, or a ResourceSetLock over the
  // per-resource lock for several (all or nothing, renewed together by the
  // one watch, its deadline the earliest of theirs).
  absl::Status BuildLock() {
    if (run_.permits > 0) return BuildSemaphore();
    if (s_.size() == 1 && run_.fair) {
      // Waits in its own queue (no RetryLock: its attempts would not queue).
      FairLockOptions o;
      o.key_prefix = common_.prefix;
      o.command_timeout = common_.timeout;
      o.observer = &observer_;
      if (run_.restart_window_set) o.restart_window = run_.restart_window;
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
  absl::Status BuildResourceLock() {
    if (s_.size() == 1) {
      ReadWriteLockOptions o;
      o.key_prefix = common_.prefix;
      o.command_timeout = common_.timeout;
      o.observer = &observer_;
      if (run_.restart_window_set) o.restart_window = run_.restart_window;
      o.replica_ack.min_replicas = run_.min_replicas;
      o.replica_ack.timeout = run_.min_replicas_timeout;
      rw_ = std::make_unique<ReadWriteLock>(s_.loop(), s_.transport(0), o);
      lock_ = run_.shared ? &rw_->reader() : &rw_->writer();
      if (run_.wait > absl::ZeroDuration()) {
        RetryLockOptions r;
        r.observer = &observer_;
        // Woken by the view's release notifications (its channel, its
        // transport).
        retry_ = std::make_unique<RetryLock>(s_.loop(), lock_, r);
        lock_ = retry_.get();
      }
      return absl::OkStatus();
    }
    RedLockOptions o;
    o.keys.prefix = common_.prefix;
    o.observer = &observer_;
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
  absl::Status BuildSemaphore() {
    SemaphoreOptions o;
    o.permits = run_.permits;
    o.key_prefix = common_.prefix;
    o.command_timeout = common_.timeout;
    o.observer = &observer_;
    if (run_.restart_window_set) o.restart_window = run_.restart_window;
    semaphore_ = std::make_unique<Semaphore>(s_.loop(), s_.transport(0), o);
    lock_ = semaphore_.get();
    if (run_.wait > absl::ZeroDuration()) {
      RetryLockOptions r;
      r.observer = &observer_;
      retry_ = std::make_unique<RetryLock>(s_.loop(), semaphore_.get(), r);
      lock_ = retry_.get();
    }
    return absl::OkStatus();
  }

  void OnAcquired(absl::StatusOr<Lease> lease) {
    acquire_ = AcquireHandle();
    if (finishing_) return;
    std::string r = absl::CEscape(run_.resource);
    if (!lease.ok()) {
      const absl::Status& st = lease.status();
      bool contention = absl::IsAborted(st) ||
                        (absl::IsDeadlineExceeded(st) && run_.wait > absl::ZeroDuration() &&
                         absl::IsAborted(observer_.last_wait_error()));
      if (contention) {
        // RedLock: servers that refused for a young data set (restarted,
        // flushed or new: the restart rule) are worth naming.
        const std::string young =
            absl::StrContains(st.message(), "young")
                ? absl::StrCat("; ", st.message())
                : std::string();
        if (run_.permits > 0) {
          std::fprintf(stderr, "dlock: all %lld permits of \"%s\" are held%s\n",
                       static_cast<long long>(run_.permits), r.c_str(),
                       run_.wait > absl::ZeroDuration()
                           ? absl::StrCat(" (still after waiting ",
                                          absl::FormatDuration(run_.wait), ")").c_str()
                           : "");
          return Finish(kExitBusy);
        }
        std::fprintf(stderr, "dlock: lock \"%s\" is busy%s%s\n", r.c_str(),
                     run_.wait > absl::ZeroDuration()
                         ? absl::StrCat(" (still held after waiting ",
                                        absl::FormatDuration(run_.wait), ")").c_str()
                         : " (held by another owner)",
                     young.c_str());
        return Finish(kExitBusy);
      }
      if (absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) {
        std::fprintf(stderr, "dlock: Redis unavailable: %s\n", st.ToString().c_str());
        // Refused for young data sets (the restart rule): say how long is
        // left and what the way out is, with when it is safe.
        for (const absl::Status& why : {st, observer_.last_wait_error()}) {
          std::optional<absl::Duration> left = YoungTimeLeftQuoted(why.message());
          if (!left.has_value()) continue;
          std::fprintf(stderr, "%s\n", YoungDataSetAdvice(*left, common_.urls).c_str());
          break;
        }
        return Finish(kExitUnavailable);
      }
      // kInvalidArgument -> 64 (a configuration the lock refuses),
      // kPermissionDenied -> 77 (ACL NOPERM, NOAUTH), else 70.
      std::fprintf(stderr, "dlock: cannot take lock \"%s\": %s%s\n", r.c_str(),
                   absl::IsPermissionDenied(st) ? "permission denied: " : "",
                   st.ToString().c_str());
      return Finish(ExitCodeForStatus(st));
    }
    lease_ = *std::move(lease);
    Spawn();
  }

  void Spawn() {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "DLOCK_FENCE=", 12) == 0 ||
          std::strncmp(*e, "DLOCK_FENCES=", 13) == 0 ||
          std::strncmp(*e, "DLOCK_RESOURCE=", 15) == 0) {
        continue;
      }
      env_strings.emplace_back(*e);
    }
    env_strings.push_back(absl::StrCat("DLOCK_FENCE=", lease_.fence));
    env_strings.push_back(absl::StrCat("DLOCK_RESOURCE=", lease_.resource));
    if (set_ != nullptr) {
      // Several resources: each one's fence, in the sorted order of
      // DLOCK_RESOURCE's list.
      absl::StatusOr<std::vector<Lease>> subs = ResourceSetLock::SubLeases(lease_);
      std::vector<int64_t> fences;
      if (subs.ok()) {
        for (const Lease& l : *subs) fences.push_back(l.fence);
      }
      env_strings.push_back(absl::StrCat("DLOCK_FENCES=", absl::StrJoin(fences, " ")));
    }
    std::vector<char*> env;
    for (std::string& e : env_strings) env.push_back(e.data());
    env.push_back(nullptr);
    std::vector<std::string> args = run_.command;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // Watch SIGCHLD before the child exists, so its exit cannot be missed.
    child_watcher_ = new uv_signal_t;
    uv_signal_init(s_.uv_loop(), child_watcher_);
    child_watcher_->data = this;
    uv_signal_start(child_watcher_, &Runner::OnUvChild, SIGCHLD);

    // report: the child's exec errno (EOF once exec succeeded). go: the
    // child waits for one byte before exec, i.e. until its process group
    // exists and the watcher is in place; EOF (dlock died) makes it exit.
    int report[2], go[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "dlock: pipe: %s\n", std::strerror(errno));
      StopChildWatcher();
      ReleaseThenFinish(kExitInternal);
      return;
    }
    if (pipe2(go, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "dlock: pipe: %s\n", std::strerror(errno));
      close(report[0]);
      close(report[1]);
      StopChildWatcher();
      ReleaseThenFinish(kExitInternal);
      return;
    }
    const int death_signal = OnLostSignal();
    // A job of an interactive shell (dlock leads its process group, which
    // is the terminal's foreground group): the command's group gets the
    // terminal (it may read it; ^C and ^Z reach it) until it is gone, or it
    // would be stopped by SIGTTIN at its first read. Otherwise (e.g. dlock
    // in a shell script) the terminal stays with dlock's group, so a ^C
    // still stops the script too, and is handed over only if the command
    // does need it (OnChildStopped).
    if (isatty(STDIN_FILENO) && getpgrp() == getpid() &&
        tcgetpgrp(STDIN_FILENO) == getpgrp()) {
      tty_fd_ = STDIN_FILENO;
    }
    const pid_t parent = getpid();
    // Everything the child needs is prepared above: after fork it makes
    // only async-signal-safe calls.
    pid_t pid = fork();
    if (pid == 0) {
      if (death_signal != 0) prctl(PR_SET_PDEATHSIG, death_signal);
      if (getppid() != parent) _exit(kExitInternal);  // dlock already gone
      close(go[1]);
      // A process group of its own: dlock signals the whole group, so a
      // script's background jobs and subprocesses are stopped too.
      setpgid(0, 0);
      char byte = 0;
      ssize_t got;
      do {
        got = read(go[0], &byte, 1);
      } while (got < 0 && errno == EINTR);
      if (got != 1) _exit(kExitInternal);  // dlock died before the go
      // Keep stdio and the report pipe; drop dlock's Redis sockets.
      syscall(SYS_close_range, 3u, static_cast<unsigned>(report[1]) - 1, 0u);
      syscall(SYS_close_range, static_cast<unsigned>(report[1]) + 1, ~0u, 0u);
      // Ignored signals stay ignored across exec: restore what dlock changed.
      signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      environ = env.data();
      execvp(argv[0], argv.data());
      int err = errno;
      ssize_t ignored = write(report[1], &err, sizeof(err));
      (void)ignored;
      _exit(kExitNotFound);
    }
    close(report[1]);
    close(go[0]);
    if (pid > 0) {
      // Both sides set the group, so it exists whoever runs first.
      setpgid(pid, pid);
      if (tty_fd_ >= 0) {
        if (tcsetpgrp(tty_fd_, pid) == 0) {
          tty_owned_by_group_ = true;
        } else {
          tty_fd_ = -1;
        }
      }
      child_pid_ = pid;
      pgid_ = pid;
      StartWatcher(death_signal);
      char byte = 1;
      ssize_t w;
      do {
        w = write(go[1], &byte, 1);
      } while (w < 0 && errno == EINTR);
    }
    close(go[1]);
    int exec_errno = 0;
    ssize_t n = pid < 0 ? -1 : 0;
    if (pid > 0) {
      // Returns 0 (EOF) once exec succeeded (the pipe is close-on-exec).
      do {
        n = read(report[0], &exec_errno, sizeof(exec_errno));
      } while (n < 0 && errno == EINTR);
    }
    close(report[0]);
    if (pid < 0 || n > 0) {
      int err = pid < 0 ? errno : exec_errno;
      if (pid > 0) {
        StopWatcher();  // the child never ran anything: nothing to stop
        int st;
        waitpid(pid, &st, 0);
      }
      std::fprintf(stderr, "dlock: cannot run %s: %s\n", args[0].c_str(), std::strerror(err));
      StopChildWatcher();
      ReleaseThenFinish(err == ENOENT ? kExitNotFound : kExitCannotExecute);
      return;
    }
    running_ = true;
    // A child that exited before running_ was set sent its SIGCHLD too
    // early to be noticed: check once on the next turn.
    s_.loop()->RunAfter(absl::ZeroDuration(), [this] { CheckChildren(); });
    if (common_.verbose) {
      std::fprintf(stderr,
                   "dlock: holding \"%s\" (fence %lld); running %s (pid %d, process group "
                   "%d)\n",
                   absl::CEscape(lease_.resource).c_str(),
                   static_cast<long long>(lease_.fence), args[0].c_str(),
                   static_cast<int>(child_pid_), static_cast<int>(pgid_));
    }
    WatchdogOptions wo;
    wo.observer = &observer_;
    watchdog_ = std::make_unique<Watchdog>(s_.loop(), lock_, wo);
    WatchOptions watch_options;
    watch_options.on_lost = [this](absl::Status why) { OnLost(std::move(why)); };
    absl::StatusOr<WatchHandle> watch = watchdog_->Watch(lease_, std::move(watch_options));
    if (!watch.ok()) {
      OnLost(watch.status());
      return;
    }
    watch_ = *std::move(watch);
    watching_ = true;
  }

  // The signal for the command on a lost lease (and dlock's death): SIGTERM,
  // SIGKILL, or 0 for --on-lost=ignore.
  int OnLostSignal() const {
    return run_.on_lost == OnLost::kTerm   ? SIGTERM
           : run_.on_lost == OnLost::kKill ? SIGKILL
                                           : 0;
  }

  // --- The watcher: stops the process group if dlock itself dies. --------
  //
  // A process forked by dlock, outside the command's group, holding the read
  // end of a pipe whose write end only dlock has. dlock writes each new
  // lease deadline (CLOCK_MONOTONIC ns, the UvEventLoop clock) after every
  // successful renewal, and kDone once the group is gone, before it reaps
  // the command (so the group id cannot have been reused) and exits. EOF
  // without kDone means dlock died (SIGKILL, crash): the watcher sends the
  // --on-lost signal to the group, then SIGKILL at
  //   min(death + --kill-after, lease deadline - ttl/10)
  // so the group is dead before the lease (which nobody renews now) can
  // expire on the server. The lease deadline is already earlier than the
  // server-side expiry (counted from when the extend was sent, minus the
  // drift allowance). With renewal every ttl/3, a dlock that died while its
  // renewals succeeded leaves at least ~2/3 ttl, so the group gets SIGKILL
  // at the latest ~0.57 ttl after dlock's death (and ~0.1 ttl before the
  // deadline).
  static constexpr int64_t kDone = -1;

  [[noreturn]] static void WatcherMain(int fd, pid_t pgid, int first_signal,
                                       int64_t kill_after_ns, int64_t deadline_ns,
                                       int64_t margin_ns) {
    // Async-signal-safe calls only (forked from a process with threads).
    for (;;) {
      int64_t msg = 0;
      size_t got = 0;
      while (got < sizeof(msg)) {
        ssize_t n = read(fd, reinterpret_cast<char*>(&msg) + got, sizeof(msg) - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got != sizeof(msg)) break;  // EOF: dlock is gone without kDone
      if (msg == kDone) _exit(0);
      deadline_ns = msg;
    }
    static const char kMessage[] =
        "dlock: dlock died while holding the lock; stopping the command's process group\n";
    ssize_t ignored = write(2, kMessage, sizeof(kMessage) - 1);
    (void)ignored;
    const int64_t now = MonotonicNanos();
    const int64_t kill_at = std::min(now + kill_after_ns, deadline_ns - margin_ns);
    kill(-pgid, first_signal);
    if (first_signal != SIGKILL) {
      while (MonotonicNanos() < kill_at) {
        if (kill(-pgid, 0) != 0) _exit(0);
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, nullptr);
      }
      kill(-pgid, SIGKILL);
    }
    _exit(0);
  }

  static int64_t MonotonicNanos() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  static int64_t DeadlineNanos(absl::Time deadline) {
    // UvEventLoop::Now() is UnixEpoch() + uv_hrtime() (CLOCK_MONOTONIC).
    return absl::ToInt64Nanoseconds(deadline - absl::UnixEpoch());
  }

  void StartWatcher(int death_signal) {
    if (death_signal == 0) return;  // --on-lost=ignore: let it run
    int w[2];
    if (pipe2(w, O_CLOEXEC) != 0) {
      PrintLine(absl::StrCat("pipe: ", std::strerror(errno),
                             "; running without a watcher (if dlock is killed only the "
                             "direct child is signalled)"));
      return;
    }
    const int64_t kill_after_ns = absl::ToInt64Nanoseconds(run_.kill_after);
    const int64_t deadline_ns = DeadlineNanos(lease_.deadline);
    const int64_t margin_ns = absl::ToInt64Nanoseconds(lease_.ttl / 10);
    const pid_t group = pgid_;
    pid_t pid = fork();
    if (pid == 0) {
      // Survive what is meant for dlock (a terminal's ^C reaches the whole
      // foreground group) and SIGPIPE; keep stdio and the pipe only.
      for (int signum : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) {
        signal(signum, SIG_IGN);
      }
      signal(SIGCHLD, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      syscall(SYS_close_range, 3u, static_cast<unsigned>(w[0]) - 1, 0u);
      syscall(SYS_close_range, static_cast<unsigned>(w[0]) + 1, ~0u, 0u);
      WatcherMain(w[0], group, death_signal, kill_after_ns, deadline_ns, margin_ns);
    }
    close(w[0]);
    if (pid < 0) {
      close(w[1]);
      PrintLine(absl::StrCat("fork: ", std::strerror(errno),
                             "; running without a watcher (if dlock is killed only the "
                             "direct child is signalled)"));
      return;
    }
    watcher_pid_ = pid;
    watcher_fd_ = w[1];
  }

  void SendToWatcher(int64_t msg) {
    if (watcher_fd_ < 0) return;
    ssize_t n;
    do {
      n = write(watcher_fd_, &msg, sizeof(msg));
    } while (n < 0 && errno == EINTR);
  }

  // After a renewal: tell the watcher the new deadline.
  void OnRenewed() {
    if (watching_ && watch_.active()) SendToWatcher(DeadlineNanos(watch_.lease().deadline));
  }

  // The group is gone: the watcher must never signal its id again.
  void StopWatcher() {
    if (watcher_fd_ < 0) return;
    SendToWatcher(kDone);
    close(watcher_fd_);
    watcher_fd_ = -1;
  }

  // --- The command's process group. -------------------------------------

  // Gives the terminal back to dlock's own process group (if it was handed
  // to the command's). dlock is then a background process: SIGTTOU is
  // blocked around the call, as POSIX allows.
  void TakeTerminalBack() {
    if (tty_fd_ < 0 || !tty_owned_by_group_) return;
    tty_owned_by_group_ = false;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(tty_fd_, getpgrp());
    sigprocmask(SIG_SETMASK, &old, nullptr);
  }

  void SignalGroup(int signum) {
    if (pgid_ > 0 && !group_gone_) kill(-pgid_, signum);
  }

  // SIGKILL the group if it is still there after --kill-after (armed once).
  void ArmKillTimer() {
    if (kill_timer_ != 0 || run_.kill_after == absl::ZeroDuration()) {
      if (kill_timer_ == 0) SignalGroup(SIGKILL);
      return;
    }
    kill_timer_ = s_.loop()->RunAfter(run_.kill_after, [this] {
      kill_timer_ = 0;
      if (running_) {
        PrintLine("command's process group still running; sending SIGKILL");
        SignalGroup(SIGKILL);
      }
    });
  }

  void OnLost(absl::Status why) {
    if (lost_) return;
    lost_ = true;
    const char* action = "letting it finish (--on-lost=ignore)";
    if (running_) {
      if (run_.on_lost == OnLost::kTerm) {
        action = "sending SIGTERM to the command's process group";
        SignalGroup(SIGTERM);
        ArmKillTimer();
      } else if (run_.on_lost == OnLost::kKill) {
        action = "sending SIGKILL to the command's process group";
        SignalGroup(SIGKILL);
      }
    }
    std::fprintf(stderr, "dlock: lock \"%s\" lost (%s); %s\n",
                 absl::CEscape(run_.resource).c_str(), why.ToString().c_str(), action);
  }

  static void OnUvChild(uv_signal_t* handle, int) {
    static_cast<Runner*>(handle->data)->CheckChildren();
  }

  // True while a process of group `pgid_` other than zombies runs. Reads
  // /proc (a zombie still counts for kill(-pgid, 0)); without /proc the
  // group counts as gone once the direct child exited.
  bool GroupAlive() const {
    DIR* dir = opendir("/proc");
    if (dir == nullptr) return false;
    bool alive = false;
    while (struct dirent* entry = readdir(dir)) {
      int pid = 0;
      if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == child_pid_) continue;
      char path[64];
      std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      char buf[512];
      ssize_t n = read(fd, buf, sizeof(buf) - 1);
      close(fd);
      if (n <= 0) continue;
      buf[n] = '\0';
      // "pid (comm) S ppid pgrp ..."; comm may hold spaces and parens.
      const char* paren = std::strrchr(buf, ')');
      if (paren == nullptr) continue;
      char state = 0;
      int ppid = 0, pgrp = 0;
      if (std::sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
      if (pgrp == pgid_ && state != 'Z' && state != 'X') {
        alive = true;
        break;
      }
    }
    closedir(dir);
    return alive;
  }

  // The direct child stopped with `signum` (job control).
  //   ^Z while the command has the terminal, or a read/mode change of the
  //   terminal (SIGTTIN/SIGTTOU) while dlock is in the background: dlock
  //   stops itself too, so the shell sees a stopped job and has the
  //   terminal; `fg` continues dlock, which goes on below.
  //   SIGTTIN/SIGTTOU while dlock's group has the terminal (dlock in the
  //   foreground): the command needs the terminal, it gets it.
  // Then the terminal goes to the command's group if dlock's group has it,
  // and the group is continued. (The lease is not renewed while dlock is
  // stopped: a stop longer than its validity loses the lock, exit 79.)
  // Other stops (SIGSTOP from elsewhere, no terminal) are left alone.
  void OnChildStopped(int signum) {
    const bool tty = isatty(STDIN_FILENO) == 1;
    const bool needs_tty = tty && (signum == SIGTTIN || signum == SIGTTOU);
    if (!tty_owned_by_group_ && !needs_tty) return;
    const bool dlock_has_tty = tty && tcgetpgrp(STDIN_FILENO) == getpgrp();
    if (tty_owned_by_group_ || !dlock_has_tty) {
      TakeTerminalBack();
      raise(SIGSTOP);
      // Continued (fg or bg).
    }
    if (tty && tcgetpgrp(STDIN_FILENO) == getpgrp() && tcsetpgrp(STDIN_FILENO, pgid_) == 0) {
      tty_fd_ = STDIN_FILENO;
      tty_owned_by_group_ = true;
    }
    SignalGroup(SIGCONT);
  }

  // On SIGCHLD, once after the spawn, and every kGroupPoll while the
  // direct child has exited but other members of its group still run.
  void CheckChildren() {
    if (!running_) return;
    if (watcher_pid_ > 0) {
      int st;
      if (waitpid(watcher_pid_, &st, WNOHANG) == watcher_pid_) watcher_pid_ = -1;
    }
    if (!child_exited_) {
      siginfo_t stop;
      std::memset(&stop, 0, sizeof(stop));
      if (waitid(P_PID, static_cast<id_t>(child_pid_), &stop, WSTOPPED | WNOHANG) == 0 &&
          stop.si_pid == child_pid_) {
        OnChildStopped(stop.si_status);
      }
    }
    if (!child_exited_) {
      // Peek without reaping: while the direct child is an unreaped zombie
      // its pid -- the group id -- cannot be reused.
      siginfo_t info;
      std::memset(&info, 0, sizeof(info));
      int r;
      do {
        r = waitid(P_PID, static_cast<id_t>(child_pid_), &info, WEXITED | WNOHANG | WNOWAIT);
      } while (r < 0 && errno == EINTR);
      if (r != 0 || info.si_pid != child_pid_) return;  // still running
      child_exited_ = true;
      child_status_ = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
      // What is left of the group runs in the background, as after a shell
      // job's leader exits: dlock is in the foreground again, so a ^C
      // reaches dlock (forwarded; SIGKILL after --kill-after).
      TakeTerminalBack();
    }
    if (GroupAlive()) {
      if (poll_timer_ == 0) {
        poll_timer_ = s_.loop()->RunAfter(kGroupPoll, [this] {
          poll_timer_ = 0;
          CheckChildren();
        });
      }
      return;
    }
    // Every process of the group has exited.
    if (poll_timer_ != 0) {
      s_.loop()->Cancel(poll_timer_);
      poll_timer_ = 0;
    }
    group_gone_ = true;
    TakeTerminalBack();
    StopWatcher();
    int st;
    waitpid(child_pid_, &st, 0);  // now the group id may be reused
    StopChildWatcher();
    OnGroupExit(child_status_);
  }

  void StopChildWatcher() {
    if (child_watcher_ == nullptr) return;
    uv_close(reinterpret_cast<uv_handle_t*>(child_watcher_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_signal_t*>(h); });
    child_watcher_ = nullptr;
  }

  void OnGroupExit(int status) {
    running_ = false;
    if (kill_timer_ != 0) {
      s_.loop()->Cancel(kill_timer_);
      kill_timer_ = 0;
    }
    if (common_.verbose) {
      std::fprintf(stderr, "dlock: command exited with status %d; its process group is gone\n",
                   status);
    }
    ReleaseThenFinish(lost_ ? kExitLost : status);
  }

  void ReleaseThenFinish(int code) {
    pending_code_ = code;
    absl::Status s;
    if (watching_) {
      s = watch_.Release([this](absl::Status st) { OnReleased(st); });
    } else {
      s = lock_->Release(lease_, [this](absl::Status st) { OnReleased(st); });
    }
    if (!s.ok()) OnReleased(s);
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
    StopSignals();
    done_ = true;
  }

  void StartSignals() {
    for (int signum : kForwardedSignals) {
      auto* h = new uv_signal_t;
      uv_signal_init(s_.uv_loop(), h);
      h->data = this;
      uv_signal_start(h, &Runner::OnUvSignal, signum);
      signals_.push_back(h);
    }
  }
  void StopSignals() {
    for (uv_signal_t* h : signals_) {
      uv_close(reinterpret_cast<uv_handle_t*>(h),
               [](uv_handle_t* handle) { delete reinterpret_cast<uv_signal_t*>(handle); });
    }
    signals_.clear();
  }
  static void OnUvSignal(uv_signal_t* handle, int signum) {
    static_cast<Runner*>(handle->data)->OnSignal(signum);
  }
  void OnSignal(int signum) {
    if (signum == SIGINT || signum == SIGQUIT) interrupted_by_ = signum;
    if (running_) {
      // Forwarded to the whole group; its exit ends the run. Whatever is
      // left of the group after --kill-after gets SIGKILL (a script's
      // background jobs ignore SIGINT and SIGQUIT).
      SignalGroup(signum);
      ArmKillTimer();
      return;
    }
    if (!finishing_) {
      // Still acquiring: give up; whatever was taken is released.
      finishing_ = true;
      acquire_.Cancel();
      std::fprintf(stderr, "dlock: interrupted by signal %d while acquiring\n", signum);
      Finish(128 + signum);
    }
  }

  Session& s_;
  const CommonOptions& common_;
  const RunOptions& run_;
  CliObserver observer_;

  std::unique_ptr<ReadWriteLock> rw_;
  std::unique_ptr<Semaphore> semaphore_;
  std::unique_ptr<RetryLock> retry_;
  std::unique_ptr<FairLock> fair_;
  std::unique_ptr<RedLock> redlock_;
  std::unique_ptr<ResourceSetLock> set_;
  Lock* lock_ = nullptr;
  std::unique_ptr<Watchdog> watchdog_;
  WatchHandle watch_;
  AcquireHandle acquire_;
  Lease lease_;
  absl::Time acquire_start_;

  static constexpr absl::Duration kGroupPoll = absl::Milliseconds(20);

  pid_t child_pid_ = -1;
  pid_t pgid_ = -1;
  pid_t watcher_pid_ = -1;
  int watcher_fd_ = -1;
  int tty_fd_ = -1;  // the terminal handed to the command's group, or -1
  bool tty_owned_by_group_ = false;
  uv_signal_t* child_watcher_ = nullptr;
  std::vector<uv_signal_t*> signals_;
  TimerId kill_timer_ = 0;
  TimerId poll_timer_ = 0;
  bool watching_ = false;
  bool running_ = false;  // spawned, and its process group not yet gone
  bool child_exited_ = false;
  int child_status_ = 0;
  int interrupted_by_ = 0;  // SIGINT or SIGQUIT received by dlock, or 0
  bool group_gone_ = false;
  bool lost_ = false;
  bool finishing_ = false;
  bool done_ = false;
  int pending_code_ = 0;
  int exit_code_ = kExitInternal;
};

}  // namespace

int RunCommand(const CommonOptions& common, const RunOptions& run) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.tls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    return ExitCodeForStatus(session.status());
  }
  int code;
  int reraise;
  {
    Runner runner(**session, common, run);
    code = runner.Run();
    reraise = runner.ReraiseSignal();
  }
  if (reraise != 0) {
    session->reset();  // closes the connections and the loop
    std::fflush(nullptr);
    if (reraise == SIGQUIT) {
      struct rlimit no_core = {0, 0};  // a ^\ is no crash of dlock's
      setrlimit(RLIMIT_CORE, &no_core);
    }
    signal(reraise, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, reraise);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(reraise);
  }
  return code;
}

}  // namespace cli
}  // namespace dlock
