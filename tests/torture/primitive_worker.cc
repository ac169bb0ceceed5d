// primitive_worker: one worker process of the primitives' torture run
// (primitive_driver.h). Loops: acquire (with a wait) one of issue 16's
// primitives on one lock server, hold it for --hold_ms under a Watchdog,
// release. Every step is appended to --log on the shared monotonic clock
// (the line formats are in primitive_check.h):
//   ask / queued (FairLock: the first reply that queued the wait) / grant
//   (with the lease's local deadline) / end (with the latest renewed
//   deadline and whether the watchdog declared the lease lost) / fail.
// A hold ends at --hold_ms or when the watchdog reports the lease lost,
// whichever comes first. Its phase (0 out, 1 waiting, 2 holding) is
// published in slot --id of the shared page --shm for the nemesis.
//
//   --primitive=reader|writer   a ReadWriteLock view, through a RetryLock
//   --primitive=semaphore       a Semaphore of --permits, through a RetryLock
//   --primitive=fair            a FairLock (it waits itself), --queue_ttl_ms
//   --primitive=multi           the resources --resources (indices) as one
//                               set: ResourceSetLock over RetryLock over
//                               SimpleLock. After a failed acquire the worker
//                               logs how many sub-leases it was granted but
//                               had not seen released (`left`: MultiLock
//                               promises none) and how many releases had an
//                               unknown outcome (documented: left to expire).
//
// SIGTERM: end the current hold (or cancel the wait), release, exit 0.
// Bad flags: a message on stderr, exit 2.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/tests/torture/worker_processes.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/watchdog/watchdog.h"

ABSL_FLAG(int, id, 0, "worker index (slot in --shm)");
ABSL_FLAG(int, lock_port, 0, "lock server port");
ABSL_FLAG(std::string, primitive, "", "reader, writer, semaphore, fair or multi");
ABSL_FLAG(int, permits, 2, "--primitive=semaphore: permits");
ABSL_FLAG(std::string, resources, "0,1", "--primitive=multi: resource indices of the set");
ABSL_FLAG(int, ttl_ms, 400, "lease ttl");
ABSL_FLAG(int, hold_ms, 150, "how long a hold lasts (renewed by the watchdog)");
ABSL_FLAG(int, wait_ms, 1000, "how long one Acquire may wait");
ABSL_FLAG(int, queue_ttl_ms, 900, "--primitive=fair: FairLockOptions::queue_ttl");
ABSL_FLAG(int, restart_window_ms, 0, "the primitive's restart window (0: off)");
ABSL_FLAG(std::string, log, "", "record file (appended)");
ABSL_FLAG(std::string, shm, "", "shared page of phase slots");

namespace dlock {
namespace {

constexpr int kMaxSlots = 512;

int64_t Ns(absl::Time t) { return absl::ToInt64Nanoseconds(t - absl::UnixEpoch()); }


// Sees every sub-lease a MultiLock is granted and every release it makes,
// so a failed acquire can be checked for a strict subset left behind. The
// record is shared with the callbacks: a MultiLock cancelled at shutdown
// releases in the background, and those releases may answer after this
// object is gone.
class RecordingLock : public Lock {
 public:
  enum class State { kHeld, kReleasing, kReleased, kUnknown };
  explicit RecordingLock(Lock* inner) : inner_(inner) {}

  void Reset() { subs_->clear(); }
  // Granted and not (definitively or at all) released yet / release
  // outcome unknown.
  int Left() const { return Count(State::kHeld) + Count(State::kReleasing); }
  int Unknown() const { return Count(State::kUnknown); }

  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override {
    return inner_->Acquire(
        resource, options,
        [subs = subs_, cb = std::move(callback)](absl::StatusOr<Lease> l) mutable {
          if (l.ok()) (*subs)[l->token] = State::kHeld;
          std::move(cb)(std::move(l));
        });
  }
  absl::Status Release(const Lease& lease, StatusCallback callback) override {
    auto it = subs_->find(lease.token);
    if (it != subs_->end()) it->second = State::kReleasing;
    return inner_->Release(lease, [subs = subs_, token = lease.token,
                                   cb = std::move(callback)](absl::Status s) mutable {
      auto it = subs->find(token);
      if (it != subs->end()) {
        const bool unknown = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
        it->second = unknown ? State::kUnknown : State::kReleased;
      }
      std::move(cb)(std::move(s));
    });
  }
  absl::Status Extend(const Lease& lease, absl::Duration ttl, LeaseCallback callback) override {
    return inner_->Extend(lease, ttl, std::move(callback));
  }

 private:
  int Count(State s) const {
    int n = 0;
    for (const auto& [token, state] : *subs_) n += state == s;
    return n;
  }
  Lock* inner_;
  std::shared_ptr<std::map<std::string, State>> subs_ =
      std::make_shared<std::map<std::string, State>>();
};

// Logs the first "queued" of each FairLock wait.
class QueueObserver : public LockObserver {
 public:
  std::function<void()> on_queued;
  void OnAcquireWait(const AcquireWaitEvent& event) override {
    if (event.policy == "fair" && on_queued) on_queued();
  }
};

struct Config {
  EventLoop* loop;
  Lock* lock;
  Watchdog* watchdog;
  RecordingLock* recording;  // multi only
  std::string resource;
  AcquireOptions acquire;
  absl::Duration hold;
  int log_fd;
  std::atomic<int32_t>* phase;
};

// The acquire -> hold -> release loop.
class Holder {
 public:
  explicit Holder(Config c) : c_(std::move(c)) {}

  void Start() { Next(); }

  // Ends the hold or the wait, releases, then calls `done` (on the loop).
  void Stop(std::function<void()> done) {
    stopping_ = true;
    done_ = std::move(done);
    if (holding_) return EndHold(false);
    if (waiting_) {
      if (handle_.Cancel()) {
        waiting_ = false;
        Log(absl::StrFormat("fail %d %d %d 0 0", seq_, Now(),
                            static_cast<int>(absl::StatusCode::kCancelled)));
        return Finish();
      }
      return;  // its callback is running or about to: it finishes
    }
    if (releasing_) return;  // the release's callback finishes
    if (timer_ != 0 && c_.loop->Cancel(timer_)) timer_ = 0;
    Finish();
  }

  void Queued() {
    if (!waiting_ || queued_logged_) return;
    queued_logged_ = true;
    Log(absl::StrFormat("queued %d %d", seq_, Now()));
  }

 private:
  int64_t Now() const { return Ns(c_.loop->Now()); }
  void Log(const std::string& line) { torture::WriteAll(c_.log_fd, line + "\n"); }
  void Phase(int32_t p) { c_.phase->store(p); }

  void Finish() {
    if (!done_) return;
    auto d = std::move(done_);
    done_ = nullptr;
    c_.loop->RunAfter(absl::ZeroDuration(), std::move(d));
  }

  void After(absl::Duration d) {
    if (stopping_) return Finish();
    timer_ = c_.loop->RunAfter(d, [this] {
      timer_ = 0;
      Next();
    });
  }

  void Next() {
    if (stopping_) return Finish();
    ++seq_;
    queued_logged_ = false;
    if (c_.recording != nullptr) c_.recording->Reset();
    Log(absl::StrFormat("ask %d %d", seq_, Now()));
    waiting_ = true;
    Phase(1);
    absl::StatusOr<AcquireHandle> h = c_.lock->Acquire(
        c_.resource, c_.acquire, [this](absl::StatusOr<Lease> l) { OnLease(std::move(l)); });
    if (!h.ok()) {
      // A configuration the primitive refuses: nothing will ever work.
      std::fprintf(stderr, "Acquire: %s\n", h.status().ToString().c_str());
      std::exit(2);
    }
    handle_ = *h;
  }

  void OnLease(absl::StatusOr<Lease> l) {
    waiting_ = false;
    if (!l.ok()) {
      const int left = c_.recording != nullptr ? c_.recording->Left() : 0;
      const int unknown = c_.recording != nullptr ? c_.recording->Unknown() : 0;
      Log(absl::StrFormat("fail %d %d %d %d %d", seq_, Now(),
                          static_cast<int>(l.status().code()), left, unknown));
      Phase(0);
      return After(absl::Milliseconds(5 + seq_ % 10));
    }
    holding_ = true;
    Phase(2);
    Log(absl::StrFormat("grant %d %d %d %d", seq_, Now(), Ns(l->deadline), l->fence));
    lease_ = *l;
    WatchOptions wo;
    wo.on_lost = [this, seq = seq_](absl::Status) {
      if (holding_ && seq == seq_) EndHold(true);
    };
    absl::StatusOr<WatchHandle> w = c_.watchdog->Watch(lease_, std::move(wo));
    if (!w.ok()) {
      // Only an expired lease is refused here: it is lost already.
      watch_.reset();
      return EndHold(true);
    }
    watch_ = std::make_unique<WatchHandle>(*std::move(w));
    if (stopping_) return EndHold(false);
    hold_timer_ = c_.loop->RunAfter(c_.hold, [this] {
      hold_timer_ = 0;
      EndHold(false);
    });
  }

  void EndHold(bool lost) {
    if (!holding_) return;
    holding_ = false;
    if (hold_timer_ != 0) c_.loop->Cancel(hold_timer_);
    hold_timer_ = 0;
    const Lease& latest = watch_ != nullptr ? watch_->lease() : lease_;
    lost = lost || (watch_ != nullptr && watch_->lost());
    Log(absl::StrFormat("end %d %d %d %d", seq_, Now(), Ns(latest.deadline), lost ? 1 : 0));
    Phase(0);
    releasing_ = true;
    auto next = [this](absl::Status) {
      releasing_ = false;
      After(absl::Milliseconds(seq_ % 7));
    };
    absl::Status s = watch_ != nullptr ? watch_->Release(next)
                                       : c_.lock->Release(lease_, next);
    if (!s.ok()) {
      releasing_ = false;
      After(absl::Milliseconds(seq_ % 7));
    }
  }

  Config c_;
  int64_t seq_ = 0;
  bool stopping_ = false;
  bool waiting_ = false;
  bool holding_ = false;
  bool releasing_ = false;
  bool queued_logged_ = false;
  std::function<void()> done_;
  AcquireHandle handle_;
  TimerId timer_ = 0;
  TimerId hold_timer_ = 0;
  Lease lease_;
  std::unique_ptr<WatchHandle> watch_;
};

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const int id = absl::GetFlag(FLAGS_id);
  const std::string primitive = absl::GetFlag(FLAGS_primitive);
  std::vector<std::string> multi_names;
  for (absl::string_view r :
       absl::StrSplit(absl::GetFlag(FLAGS_resources), ',', absl::SkipEmpty())) {
    int idx;
    if (!absl::SimpleAtoi(r, &idx) || idx < 0) {
      std::fprintf(stderr, "bad --resources\n");
      return 2;
    }
    multi_names.push_back(absl::StrCat("m", idx));
  }
  if (primitive == "multi" && multi_names.empty()) {
    std::fprintf(stderr, "--primitive=multi needs --resources\n");
    return 2;
  }
  const int log_fd = open(absl::GetFlag(FLAGS_log).c_str(),
                          O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    std::perror("open --log");
    return 2;
  }
  std::atomic<int32_t>* slots = nullptr;
  const int shm_fd = open(absl::GetFlag(FLAGS_shm).c_str(), O_RDWR | O_CLOEXEC);
  if (shm_fd >= 0) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    close(shm_fd);
    if (p != MAP_FAILED) slots = static_cast<std::atomic<int32_t>*>(p);
  }
  if (slots == nullptr || id < 0 || id >= kMaxSlots) {
    std::fprintf(stderr, "bad --shm or --id\n");
    return 2;
  }

  uv_loop_t uv;
  uv_loop_init(&uv);
  auto loop = std::make_unique<UvEventLoop>(&uv);
  HiredisTransportOptions to;
  to.port = absl::GetFlag(FLAGS_lock_port);
  to.reconnect_backoff_min = absl::Milliseconds(20);
  to.reconnect_backoff_max = absl::Milliseconds(200);
  auto transport = HiredisTransport::Create(&uv, to);
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.status().ToString().c_str());
    return 2;
  }
  const absl::Duration window = absl::Milliseconds(absl::GetFlag(FLAGS_restart_window_ms));
  QueueObserver observer;
  RetryLockOptions ro;
  ro.initial_backoff = absl::Milliseconds(10);
  ro.max_backoff = absl::Milliseconds(100);
  std::unique_ptr<ReadWriteLock> rw;
  std::unique_ptr<Semaphore> semaphore;
  std::unique_ptr<FairLock> fair;
  std::unique_ptr<SimpleLock> simple;
  std::unique_ptr<RetryLock> retry;
  std::unique_ptr<RecordingLock> recording;
  std::unique_ptr<ResourceSetLock> set;
  Lock* lock = nullptr;
  if (primitive == "reader" || primitive == "writer") {
    ReadWriteLockOptions o;
    o.restart_window = window;
    rw = std::make_unique<ReadWriteLock>(loop.get(), transport->get(), o);
    retry = std::make_unique<RetryLock>(loop.get(),
                                        primitive == "reader" ? &rw->reader() : &rw->writer(), ro);
    lock = retry.get();
  } else if (primitive == "semaphore") {
    SemaphoreOptions o;
    o.permits = absl::GetFlag(FLAGS_permits);
    o.restart_window = window;
    semaphore = std::make_unique<Semaphore>(loop.get(), transport->get(), o);
    retry = std::make_unique<RetryLock>(loop.get(), semaphore.get(), ro);
    lock = retry.get();
  } else if (primitive == "fair") {
    FairLockOptions o;
    o.restart_window = window;
    o.queue_ttl = absl::Milliseconds(absl::GetFlag(FLAGS_queue_ttl_ms));
    o.observer = &observer;
    fair = std::make_unique<FairLock>(loop.get(), transport->get(), o);
    lock = fair.get();
  } else if (primitive == "multi") {
    SimpleLockOptions o;
    o.restart_window = window;
    simple = std::make_unique<SimpleLock>(loop.get(), transport->get(), o);
    retry = std::make_unique<RetryLock>(loop.get(), simple.get(), ro);
    recording = std::make_unique<RecordingLock>(retry.get());
    set = std::make_unique<ResourceSetLock>(loop.get(), recording.get(), multi_names);
    lock = set.get();
  } else {
    std::fprintf(stderr, "bad --primitive \"%s\"\n", primitive.c_str());
    return 2;
  }
  auto watchdog = std::make_unique<Watchdog>(loop.get(), lock);
  Config c;
  c.loop = loop.get();
  c.lock = lock;
  c.watchdog = watchdog.get();
  c.recording = recording.get();
  c.resource = primitive == "multi" ? "set" : "torture-primitive";
  c.acquire.ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
  c.acquire.wait = absl::Milliseconds(absl::GetFlag(FLAGS_wait_ms));
  c.hold = absl::Milliseconds(absl::GetFlag(FLAGS_hold_ms));
  c.log_fd = log_fd;
  c.phase = &slots[id];
  auto holder = std::make_unique<Holder>(c);
  observer.on_queued = [h = holder.get()] { h->Queued(); };

  // SIGTERM: stop after the current hold, then tear down.
  auto* sig = new uv_signal_t;
  uv_signal_init(&uv, sig);
  std::function<void()> teardown = [&] {
    torture::WriteAll(log_fd, "done\n");
    observer.on_queued = nullptr;
    holder.reset();
    watchdog.reset();
    set.reset();
    recording.reset();
    retry.reset();
    simple.reset();
    fair.reset();
    semaphore.reset();
    rw.reset();
    (*transport)->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(sig),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_signal_t*>(h); });
  };
  struct Ctx {
    Holder* holder;
    std::function<void()>* teardown;
  };
  Ctx ctx{holder.get(), &teardown};
  sig->data = &ctx;
  uv_signal_start(
      sig,
      [](uv_signal_t* h, int) {
        auto* x = static_cast<Ctx*>(h->data);
        uv_signal_stop(h);
        x->holder->Stop([x] { (*x->teardown)(); });
      },
      SIGTERM);
  holder->Start();
  uv_run(&uv, UV_RUN_DEFAULT);
  loop.reset();
  transport->reset();
  uv_run(&uv, UV_RUN_DEFAULT);
  const int rc = uv_loop_close(&uv);
  close(log_fd);
  return rc == 0 ? 0 : 3;
}

}  // namespace
}  // namespace dlock

int main(int argc, char** argv) { return dlock::Main(argc, argv); }
