// `dlock run RESOURCE -- CMD...`: acquire, run CMD while the watchdog renews
// the lease, release when CMD exits. Everything runs on one libuv loop: the
// lock's commands, the watchdog's timers, the child's exit (a uv_signal
// watcher on SIGCHLD, then waitpid) and the signals forwarded to it.
//
// The child is started with fork + execvp rather than uv_spawn so that it
// can be tied to dlock's life: PR_SET_PDEATHSIG sends it the --on-lost
// signal (SIGTERM for term, SIGKILL for kill; nothing for ignore) if dlock
// itself dies (e.g. SIGKILL), because then nobody renews the lease and the
// command would go on running unprotected.
//
//   state      | event                       | action
//   -----------+-----------------------------+-----------------------------
//   acquiring  | lease                       | spawn CMD, start the watch
//              | busy / wait over            | exit 75
//              | unavailable                 | exit 69
//              | SIGINT/SIGTERM/SIGHUP       | cancel (releases what it took),
//              |                             | exit 128+N
//   running    | CMD exits                   | release, exit CMD's status
//              | lease lost                  | signal CMD per --on-lost; when
//              |                             | it exits, exit 79
//              | SIGINT/SIGTERM/SIGHUP/QUIT  | forwarded to CMD
//
// CMD gets DLOCK_RESOURCE and DLOCK_FENCE (the lease's fencing token) in its
// environment, so it can hand the fence to the resource it protects.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/session.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
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
        observer_(common.verbose, run.resource) {}

  ~Runner() {
    // Lock objects before the transports (the Session's); their pending
    // callbacks are delivered as kCancelled while the loop runs dry.
    watch_ = WatchHandle();
    watchdog_.reset();
    retry_.reset();
    simple_.reset();
    redlock_.reset();
  }

  int Run() {
    absl::Status built = BuildLock();
    if (!built.ok()) {
      PrintLine(built.ToString());
      return kExitUsage;
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
      return kExitUsage;
    }
    acquire_ = *handle;
    s_.RunUntil([this] { return done_; });
    return exit_code_;
  }

 private:
  absl::Status BuildLock() {
    if (s_.size() == 1) {
      SimpleLockOptions o;
      o.key_prefix = common_.prefix;
      o.command_timeout = common_.timeout;
      o.observer = &observer_;
      simple_ = std::make_unique<SimpleLock>(s_.loop(), s_.transport(0), o);
      lock_ = simple_.get();
      if (run_.wait > absl::ZeroDuration()) {
        RetryLockOptions r;
        r.key_prefix = common_.prefix;
        r.observer = &observer_;
        retry_ = std::make_unique<RetryLock>(s_.loop(), simple_.get(),
                                             s_.transport(0), r);
        lock_ = retry_.get();
      }
      return absl::OkStatus();
    }
    RedLockOptions o;
    o.keys.prefix = common_.prefix;
    o.observer = &observer_;
    o.max_ttl = std::max(o.max_ttl, run_.ttl);
    if (run_.wait == absl::ZeroDuration()) o.retry_count = 0;
    for (const RedisUrl& url : common_.urls) o.server_names.push_back(url.Display());
    absl::StatusOr<std::unique_ptr<RedLock>> lock =
        RedLock::Create(s_.loop(), s_.transports(), o);
    if (!lock.ok()) return lock.status();
    redlock_ = *std::move(lock);
    lock_ = redlock_.get();
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
        std::fprintf(stderr, "dlock: lock \"%s\" is busy%s\n", r.c_str(),
                     run_.wait > absl::ZeroDuration()
                         ? absl::StrCat(" (still held after waiting ",
                                        absl::FormatDuration(run_.wait), ")").c_str()
                         : " (held by another owner)");
        return Finish(kExitBusy);
      }
      if (absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) {
        std::fprintf(stderr, "dlock: Redis unavailable: %s\n", st.ToString().c_str());
        return Finish(kExitUnavailable);
      }
      if (absl::IsPermissionDenied(st)) {  // NOAUTH, NOPERM...: fix the credentials
        std::fprintf(stderr, "dlock: Redis refused (check the user, password and ACL): %s\n",
                     st.ToString().c_str());
        return Finish(kExitUsage);
      }
      std::fprintf(stderr, "dlock: cannot take lock \"%s\": %s\n", r.c_str(),
                   st.ToString().c_str());
      return Finish(kExitInternal);
    }
    lease_ = *std::move(lease);
    Spawn();
  }

  void Spawn() {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "DLOCK_FENCE=", 12) == 0 ||
          std::strncmp(*e, "DLOCK_RESOURCE=", 15) == 0) {
        continue;
      }
      env_strings.emplace_back(*e);
    }
    env_strings.push_back(absl::StrCat("DLOCK_FENCE=", lease_.fence));
    env_strings.push_back(absl::StrCat("DLOCK_RESOURCE=", lease_.resource));
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

    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "dlock: pipe: %s\n", std::strerror(errno));
      StopChildWatcher();
      ReleaseThenFinish(kExitInternal);
      return;
    }
    const int death_signal = run_.on_lost == OnLost::kTerm   ? SIGTERM
                             : run_.on_lost == OnLost::kKill ? SIGKILL
                                                             : 0;
    const pid_t parent = getpid();
    // Everything the child needs is prepared above: after fork it makes
    // only async-signal-safe calls.
    pid_t pid = fork();
    if (pid == 0) {
      if (death_signal != 0) prctl(PR_SET_PDEATHSIG, death_signal);
      if (getppid() != parent) _exit(kExitInternal);  // dlock already gone
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
        int st;
        waitpid(pid, &st, 0);
      }
      std::fprintf(stderr, "dlock: cannot run %s: %s\n", args[0].c_str(), std::strerror(err));
      StopChildWatcher();
      ReleaseThenFinish(err == ENOENT ? kExitNotFound : kExitCannotExecute);
      return;
    }
    child_pid_ = pid;
    child_running_ = true;
    // A child that exited before child_running_ was set sent its SIGCHLD
    // too early to be reaped: check once on the next turn.
    s_.loop()->RunAfter(absl::ZeroDuration(), [this] { ReapChild(); });
    if (common_.verbose) {
      std::fprintf(stderr, "dlock: holding \"%s\" (fence %lld); running %s (pid %d)\n",
                   absl::CEscape(lease_.resource).c_str(),
                   static_cast<long long>(lease_.fence), args[0].c_str(),
                   static_cast<int>(child_pid_));
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

  void OnLost(absl::Status why) {
    if (lost_) return;
    lost_ = true;
    const char* action = "letting it finish (--on-lost=ignore)";
    if (child_running_) {
      if (run_.on_lost == OnLost::kTerm) {
        action = "sending SIGTERM";
        kill(child_pid_, SIGTERM);
        kill_timer_ = s_.loop()->RunAfter(run_.kill_after, [this] {
          kill_timer_ = 0;
          if (child_running_) {
            PrintLine("command still running; sending SIGKILL");
            kill(child_pid_, SIGKILL);
          }
        });
      } else if (run_.on_lost == OnLost::kKill) {
        action = "sending SIGKILL";
        kill(child_pid_, SIGKILL);
      }
    }
    std::fprintf(stderr, "dlock: lock \"%s\" lost (%s); %s\n",
                 absl::CEscape(run_.resource).c_str(), why.ToString().c_str(), action);
  }

  static void OnUvChild(uv_signal_t* handle, int) {
    static_cast<Runner*>(handle->data)->ReapChild();
  }
  void ReapChild() {
    if (!child_running_) return;
    int st = 0;
    pid_t r;
    do {
      r = waitpid(child_pid_, &st, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r != child_pid_) return;  // another child, or not yet
    StopChildWatcher();
    OnChildExit(WIFEXITED(st) ? WEXITSTATUS(st) : 0,
                WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
  void StopChildWatcher() {
    if (child_watcher_ == nullptr) return;
    uv_close(reinterpret_cast<uv_handle_t*>(child_watcher_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_signal_t*>(h); });
    child_watcher_ = nullptr;
  }

  void OnChildExit(int64_t exit_status, int term_signal) {
    child_running_ = false;
    if (kill_timer_ != 0) {
      s_.loop()->Cancel(kill_timer_);
      kill_timer_ = 0;
    }
    int status = term_signal != 0 ? 128 + term_signal : static_cast<int>(exit_status);
    if (common_.verbose) {
      std::fprintf(stderr, "dlock: command exited with status %d\n", status);
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
    if (child_running_) {
      kill(child_pid_, signum);  // its exit ends the run
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

  std::unique_ptr<SimpleLock> simple_;
  std::unique_ptr<RetryLock> retry_;
  std::unique_ptr<RedLock> redlock_;
  Lock* lock_ = nullptr;
  std::unique_ptr<Watchdog> watchdog_;
  WatchHandle watch_;
  AcquireHandle acquire_;
  Lease lease_;
  absl::Time acquire_start_;

  pid_t child_pid_ = -1;
  uv_signal_t* child_watcher_ = nullptr;
  std::vector<uv_signal_t*> signals_;
  TimerId kill_timer_ = 0;
  bool watching_ = false;
  bool child_running_ = false;
  bool lost_ = false;
  bool finishing_ = false;
  bool done_ = false;
  int pending_code_ = 0;
  int exit_code_ = kExitInternal;
};

}  // namespace

int RunCommand(const CommonOptions& common, const RunOptions& run) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    return kExitUnavailable;
  }
  int code;
  {
    Runner runner(**session, common, run);
    code = runner.Run();
  }
  return code;
}

}  // namespace cli
}  // namespace dlock
