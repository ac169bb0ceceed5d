#include "dlock/lock/multi_lock.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
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

namespace {

// Token encoding: per sub-lease "<n>:<resource><n>:<token><fence>;".
std::string EncodeSubLeases(const std::vector<Lease>& leases) {
  std::string out;
  for (const Lease& l : leases) {
    absl::StrAppend(&out, l.resource.size(), ":", l.resource, l.token.size(), ":", l.token,
                    l.fence, ";");
  }
  return out;
}

// Reads "<n>:<n bytes>" at `pos`.
bool ReadSized(absl::string_view s, size_t& pos, std::string* out) {
  size_t colon = s.find(':', pos);
  if (colon == absl::string_view::npos) return false;
  size_t n = 0;
  if (!absl::SimpleAtoi(s.substr(pos, colon - pos), &n)) return false;
  if (colon + 1 + n > s.size() || n > s.size()) return false;
  *out = std::string(s.substr(colon + 1, n));
  pos = colon + 1 + n;
  return true;
}

Lease Combine(absl::string_view label, absl::Duration ttl, const std::vector<Lease>& subs) {
  Lease out;
  out.resource = std::string(label);
  out.token = EncodeSubLeases(subs);
  out.fence = subs.front().fence;
  out.ttl = ttl;
  out.deadline = subs.front().deadline;
  for (const Lease& l : subs) out.deadline = std::min(out.deadline, l.deadline);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Lease>> ResourceSetLock::SubLeases(const Lease& lease) {
  std::vector<Lease> subs;
  absl::string_view s = lease.token;
  size_t pos = 0;
  while (pos < s.size()) {
    Lease l;
    size_t semi;
    if (!ReadSized(s, pos, &l.resource) || !ReadSized(s, pos, &l.token) ||
        (semi = s.find(';', pos)) == absl::string_view::npos ||
        !absl::SimpleAtoi(s.substr(pos, semi - pos), &l.fence)) {
      return absl::InvalidArgumentError("not a resource-set lease token");
    }
    pos = semi + 1;
    l.ttl = lease.ttl;
    l.deadline = lease.deadline;
    subs.push_back(std::move(l));
  }
  if (subs.empty()) return absl::InvalidArgumentError("not a resource-set lease token");
  return subs;
}

ResourceSetLock::ResourceSetLock(EventLoop* loop, Lock* inner,
                                 std::vector<std::string> resources)
    : multi_(loop, inner), resources_(std::move(resources)) {}

absl::StatusOr<AcquireHandle> ResourceSetLock::Acquire(absl::string_view label,
                                                       const AcquireOptions& options,
                                                       LeaseCallback callback) {
  absl::Status s = ValidateResource(label);
  if (!s.ok()) return s;
  return multi_.Acquire(
      resources_, options,
      [label = std::string(label), ttl = options.ttl, callback = std::move(callback)](
          absl::StatusOr<std::vector<Lease>> leases) mutable {
        if (!leases.ok()) return std::move(callback)(leases.status());
        std::move(callback)(Combine(label, WholeMillis(ttl), *leases));
      });
}

absl::Status ResourceSetLock::Release(const Lease& lease, StatusCallback callback) {
  absl::StatusOr<std::vector<Lease>> subs = SubLeases(lease);
  if (!subs.ok()) return subs.status();
  return multi_.Release(*subs, std::move(callback));
}

absl::Status ResourceSetLock::Extend(const Lease& lease, absl::Duration ttl,
                                     LeaseCallback callback) {
  absl::StatusOr<std::vector<Lease>> subs = SubLeases(lease);
  if (!subs.ok()) return subs.status();
  return multi_.Extend(
      *subs, ttl,
      [label = lease.resource, ttl, callback = std::move(callback)](
          absl::StatusOr<std::vector<Lease>> leases) mutable {
        if (!leases.ok()) return std::move(callback)(leases.status());
        std::move(callback)(Combine(label, WholeMillis(ttl), *leases));
      });
}

}  // namespace dlock
