// `dlock run RESOURCE -- CMD...`: acquire, run CMD while the watchdog renews
// the lease, release when CMD exits. Everything runs on one libuv loop: the
// lock's commands, the watchdog's timers, the child (uv_spawn, whose exit
// arrives through libuv's SIGCHLD handling) and the signals forwarded to it.
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
#include <signal.h>
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

    uv_stdio_container_t stdio[3];
    for (int fd = 0; fd < 3; ++fd) {
      stdio[fd].flags = UV_INHERIT_FD;
      stdio[fd].data.fd = fd;
    }
    uv_process_options_t options;
    std::memset(&options, 0, sizeof(options));
    options.file = argv[0];
    options.args = argv.data();
    options.env = env.data();
    options.stdio_count = 3;
    options.stdio = stdio;
    options.exit_cb = &Runner::OnUvExit;
    process_ = new uv_process_t;
    process_->data = this;
    int rc = uv_spawn(s_.uv_loop(), process_, &options);
    if (rc != 0) {
      // libuv still requires the handle to be closed.
      uv_close(reinterpret_cast<uv_handle_t*>(process_), &Runner::FreeProcess);
      process_ = nullptr;
      std::fprintf(stderr, "dlock: cannot run %s: %s\n", args[0].c_str(), uv_strerror(rc));
      int code = rc == UV_ENOENT ? kExitNotFound : kExitCannotExecute;
      ReleaseThenFinish(code);
      return;
    }
    child_running_ = true;
    if (common_.verbose) {
      std::fprintf(stderr, "dlock: holding \"%s\" (fence %lld); running %s (pid %d)\n",
                   absl::CEscape(lease_.resource).c_str(),
                   static_cast<long long>(lease_.fence), args[0].c_str(),
                   process_->pid);
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
        uv_process_kill(process_, SIGTERM);
        kill_timer_ = s_.loop()->RunAfter(run_.kill_after, [this] {
          kill_timer_ = 0;
          if (child_running_) {
            PrintLine("command still running; sending SIGKILL");
            uv_process_kill(process_, SIGKILL);
          }
        });
      } else if (run_.on_lost == OnLost::kKill) {
        action = "sending SIGKILL";
        uv_process_kill(process_, SIGKILL);
      }
    }
    std::fprintf(stderr, "dlock: lock \"%s\" lost (%s); %s\n",
                 absl::CEscape(run_.resource).c_str(), why.ToString().c_str(), action);
  }

  static void OnUvExit(uv_process_t* process, int64_t exit_status, int term_signal) {
    static_cast<Runner*>(process->data)->OnChildExit(exit_status, term_signal);
  }
  static void FreeProcess(uv_handle_t* handle) {
    delete reinterpret_cast<uv_process_t*>(handle);
  }

  void OnChildExit(int64_t exit_status, int term_signal) {
    child_running_ = false;
    if (kill_timer_ != 0) {
      s_.loop()->Cancel(kill_timer_);
      kill_timer_ = 0;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(process_), &Runner::FreeProcess);
    process_ = nullptr;
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
      uv_process_kill(process_, signum);  // its exit ends the run
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

  uv_process_t* process_ = nullptr;
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
