#include "dlock/lock/multi_lock.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_rules.h"

namespace dlock {

absl::StatusOr<std::vector<std::string>> OrderResources(
    std::vector<std::string> resources) {
  if (resources.empty()) {
    return absl::InvalidArgumentError("a multi-lock needs at least one resource");
  }
  for (const std::string& r : resources) {
    absl::Status s = ValidateResource(r);
    if (!s.ok()) return s;
  }
  std::sort(resources.begin(), resources.end());
  auto dup = std::adjacent_find(resources.begin(), resources.end());
  if (dup != resources.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource \"", absl::CEscape(*dup), "\" is named twice"));
  }
  return resources;
}

namespace {

// Collects the outcomes of N operations sent together; calls back once
// with the first failure in index order, or OK with every lease.
struct Together {
  Together(size_t n, MultiLeaseCallback cb)
      : statuses(n, absl::OkStatus()), leases(n), remaining(n), callback(std::move(cb)) {}

  void Done(size_t i, absl::StatusOr<Lease> result) {
    if (result.ok()) {
      leases[i] = *std::move(result);
    } else {
      statuses[i] = result.status();
    }
    if (--remaining > 0) return;
    for (const absl::Status& s : statuses) {
      if (!s.ok()) return std::move(callback)(s);
    }
    std::move(callback)(std::move(leases));
  }

  std::vector<absl::Status> statuses;
  std::vector<Lease> leases;
  size_t remaining;
  MultiLeaseCallback callback;
};

// Releases every lease of `leases`; `done` gets the first failure (or OK)
// once all were answered. A release the lock rejects counts as failed.
void ReleaseAll(Lock* lock, const std::vector<Lease>& leases, StatusCallback done) {
  if (leases.empty()) return std::move(done)(absl::OkStatus());
  auto together = std::make_shared<Together>(
      leases.size(), [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
        std::move(done)(r.status());
      });
  for (size_t i = 0; i < leases.size(); ++i) {
    absl::Status s = lock->Release(leases[i], [together, i](absl::Status st) {
      if (st.ok()) {
        together->Done(i, Lease());
      } else {
        together->Done(i, st);
      }
    });
    if (!s.ok()) together->Done(i, s);
  }
}

class MultiAcquireOp : public Cancellable,
                       public std::enable_shared_from_this<MultiAcquireOp> {
 public:
  MultiAcquireOp(EventLoop* loop, Lock* lock, std::vector<std::string> resources,
                 const AcquireOptions& options, MultiLeaseCallback callback)
      : loop_(loop),
        lock_(lock),
        resources_(std::move(resources)),
        options_(options),
        wait_deadline_(loop->Now() + options.wait),
        callback_(std::move(callback)) {}

  // The first acquire; its rejection is the caller's.
  absl::Status Start() { return StartNext(); }

  bool Cancel() override {
    if (state_ != State::kPending) return false;
    state_ = State::kCancelled;
    MultiLeaseCallback dropped = std::move(callback_);
    (void)dropped;
    inner_.Cancel();
    ReleaseAll(lock_, leases_, [](absl::Status) {});
    leases_.clear();
    return true;
  }

 private:
  enum class State { kPending, kCancelled, kDone };

  absl::Status StartNext() {
    const absl::Time now = loop_->Now();
    if (leases_.size() == resources_.size()) {
      absl::Time earliest = leases_.front().deadline;
      for (const Lease& l : leases_) earliest = std::min(earliest, l.deadline);
      if (now >= earliest) {
        Fail(absl::DeadlineExceededError(
            "a lease of the multi-lock expired before the last resource was taken"));
      } else {
        Succeed();
      }
      return absl::OkStatus();
    }
    AcquireOptions o = options_;
    o.wait = options_.wait > absl::ZeroDuration()
                 ? std::max(absl::ZeroDuration(), wait_deadline_ - now)
                 : absl::ZeroDuration();
    std::shared_ptr<MultiAcquireOp> self = shared_from_this();
    absl::StatusOr<AcquireHandle> h =
        lock_->Acquire(resources_[leases_.size()], o,
                       [self](absl::StatusOr<Lease> lease) { self->OnLease(std::move(lease)); });
    if (!h.ok()) {
      if (leases_.empty()) return h.status();
      Fail(h.status());
      return absl::OkStatus();
    }
    inner_ = *h;
    return absl::OkStatus();
  }

  void OnLease(absl::StatusOr<Lease> lease) {
    inner_ = AcquireHandle();
    if (state_ == State::kCancelled) {
      // Cancel() could not stop this acquire: give its lease back too.
      if (lease.ok()) ReleaseAll(lock_, {*lease}, [](absl::Status) {});
      return;
    }
    if (!lease.ok()) return Fail(lease.status());
    leases_.push_back(*std::move(lease));
    absl::Status s = StartNext();
    (void)s;  // only the first acquire's rejection is returned
  }

  void Succeed() {
    state_ = State::kDone;
    MultiLeaseCallback cb = std::move(callback_);
    std::move(cb)(std::move(leases_));
  }

  // Releases what was taken, then reports `why`.
  void Fail(absl::Status why) {
    state_ = State::kDone;
    std::vector<Lease> taken = std::move(leases_);
    leases_.clear();
    ReleaseAll(lock_, taken,
               [cb = std::move(callback_), why = std::move(why)](absl::Status) mutable {
                 std::move(cb)(std::move(why));
               });
  }

  EventLoop* const loop_;
  Lock* const lock_;
  const std::vector<std::string> resources_;
  const AcquireOptions options_;
  const absl::Time wait_deadline_;
  MultiLeaseCallback callback_;
  State state_ = State::kPending;
  std::vector<Lease> leases_;
  AcquireHandle inner_;
};

}  // namespace

MultiLock::MultiLock(EventLoop* loop, Lock* lock) : loop_(loop), lock_(lock) {}

absl::StatusOr<AcquireHandle> MultiLock::Acquire(std::vector<std::string> resources,
                                                 const AcquireOptions& options,
                                                 MultiLeaseCallback callback) {
  absl::StatusOr<std::vector<std::string>> ordered = OrderResources(std::move(resources));
  if (!ordered.ok()) return ordered.status();
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must be >= 0");
  }
  auto op = std::make_shared<MultiAcquireOp>(loop_, lock_, *std::move(ordered), options,
                                             std::move(callback));
  absl::Status s = op->Start();
  if (!s.ok()) return s;
  return AcquireHandle(std::weak_ptr<Cancellable>(op));
}

absl::Status MultiLock::Release(const std::vector<Lease>& leases,
                                StatusCallback callback) {
  if (leases.empty()) return absl::InvalidArgumentError("no lease to release");
  for (const Lease& l : leases) {
    absl::Status s = ValidateResource(l.resource);
    if (!s.ok()) return s;
  }
  ReleaseAll(lock_, leases, std::move(callback));
  return absl::OkStatus();
}

absl::Status MultiLock::Extend(const std::vector<Lease>& leases, absl::Duration ttl,
                               MultiLeaseCallback callback) {
  if (leases.empty()) return absl::InvalidArgumentError("no lease to extend");
  for (const Lease& l : leases) {
    absl::Status s = ValidateResource(l.resource);
    if (!s.ok()) return s;
  }
  auto together = std::make_shared<Together>(leases.size(), std::move(callback));
  for (size_t i = 0; i < leases.size(); ++i) {
    absl::Status s = lock_->Extend(leases[i], ttl, [together, i](absl::StatusOr<Lease> r) {
      together->Done(i, std::move(r));
    });
    if (!s.ok()) {
      if (i == 0) return s;  // nothing sent (e.g. a bad ttl)
      together->Done(i, s);
    }
  }
  return absl::OkStatus();
}

}  // namespace dlock
