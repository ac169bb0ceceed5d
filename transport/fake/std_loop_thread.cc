#include "dlock/transport/fake/std_loop_thread.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dlock {
namespace {

// The steady clock as an absl::Time (monotonic; the origin is arbitrary).
absl::Time SteadyNow() {
  return absl::UnixEpoch() +
         absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

std::chrono::steady_clock::time_point ToSteady(absl::Time t) {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          absl::ToChronoNanoseconds(t - absl::UnixEpoch())));
}

// Longest single wait for the next timer; a later deadline is waited for
// in several steps (keeps the time point far from the clock's limits).
constexpr absl::Duration kMaxWait = absl::Hours(1);

}  // namespace

class StdLoopThread::Timers : public EventLoop {
 public:
  absl::Time Now() const override { return SteadyNow(); }

  TimerId RunAfter(absl::Duration delay, absl::AnyInvocable<void() &&> callback) override {
    const TimerId id = ++last_id_;
    const absl::Time due = Now() + std::max(delay, absl::ZeroDuration());
    queue_.emplace(Key{due, id}, std::move(callback));
    due_of_[id] = due;
    return id;
  }

  bool Cancel(TimerId id) override {
    auto it = due_of_.find(id);
    if (it == due_of_.end()) return false;  // ran, running, or unknown
    auto node = queue_.extract(Key{it->second, id});
    due_of_.erase(it);
    return true;  // `node` (the callback) is destroyed here
  }

  // The earliest deadline; InfiniteFuture when there is no timer.
  absl::Time NextDeadline() const {
    return queue_.empty() ? absl::InfiniteFuture() : queue_.begin()->first.due;
  }

  // Runs, in (deadline, creation) order, the timers due now that existed
  // when it was called (one added by a callback waits for the next turn).
  void RunDue() {
    const absl::Time now = Now();
    const TimerId last = last_id_;
    std::vector<TimerId> due;
    for (const auto& entry : queue_) {
      if (entry.first.due > now) break;
      if (entry.first.id <= last) due.push_back(entry.first.id);
    }
    for (TimerId id : due) {
      auto it = due_of_.find(id);
      if (it == due_of_.end()) continue;  // cancelled by an earlier callback
      auto node = queue_.extract(Key{it->second, id});
      due_of_.erase(it);
      std::move(node.mapped())();
    }
  }

 private:
  struct Key {
    absl::Time due;
    TimerId id;
    bool operator<(const Key& o) const { return due < o.due || (due == o.due && id < o.id); }
  };
  std::map<Key, absl::AnyInvocable<void() &&>> queue_;
  std::unordered_map<TimerId, absl::Time> due_of_;
  TimerId last_id_ = 0;
};

StdLoopThread::StdLoopThread() : timers_(std::make_unique<Timers>()) {
  // Run() takes mu_ first, so it sees loop_id_ set.
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = std::thread([this] { Run(); });
  loop_id_ = thread_.get_id();
}

StdLoopThread::~StdLoopThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

EventLoop* StdLoopThread::loop() { return timers_.get(); }

bool StdLoopThread::Post(absl::AnyInvocable<void() &&> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;  // `fn` is destroyed unrun
    posted_.push_back(std::move(fn));
  }
  wake_.notify_one();
  return true;
}

bool StdLoopThread::InLoopThread() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::this_thread::get_id() == loop_id_;
}

void StdLoopThread::Run() {
  for (;;) {
    std::deque<absl::AnyInvocable<void() &&>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (!posted_.empty() || stopping_) break;
        const absl::Time now = timers_->Now();
        const absl::Time next = timers_->NextDeadline();
        if (next <= now) break;
        wake_.wait_until(lock, ToSteady(std::min(next, now + kMaxWait)));
      }
      batch.swap(posted_);
      if (stopping_ && batch.empty()) break;
    }
    for (auto& fn : batch) std::move(fn)();
    batch.clear();  // what the functions captured dies on this thread
    timers_->RunDue();
  }
  timers_.reset();  // pending timers are dropped, on the loop thread
}

}  // namespace dlock
