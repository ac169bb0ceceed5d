#include "dlock/blocking/permit_facades.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/blocking/client_options.h"
#include "dlock/blocking/post_and_wait.h"

namespace dlock {

PermitFacades::PermitFacades(LoopThread* thread, Transport* transport,
                             SemaphoreOptions semaphore, bool auto_renew)
    : thread_(thread),
      transport_(transport),
      semaphore_(std::move(semaphore)),
      auto_renew_(auto_renew) {}

PermitFacades::~PermitFacades() = default;

absl::StatusOr<BlockingLock*> PermitFacades::For(int64_t permits) {
  if (permits < 1 || permits > kMaxPermits) {
    return absl::InvalidArgumentError(
        absl::StrCat("permits ", permits, " is outside [1, ", kMaxPermits, "]"));
  }
  if (transport_ == nullptr) {
    return absl::InvalidArgumentError("a semaphore needs a single Redis server");
  }
  if (thread_->InLoopThread()) {
    return absl::FailedPreconditionError("called on the client's loop thread");
  }
  MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError("the client is being destroyed");
  auto it = stacks_.find(permits);
  if (it != stacks_.end()) return it->second.facade.get();
  Stack stack;
  absl::Status built = PostAndWait<absl::Status>(thread_, [&](Completion<absl::Status> done) {
    SemaphoreOptions s = semaphore_;
    s.permits = permits;
    stack.semaphore = std::make_unique<Semaphore>(thread_->loop(), transport_, s);
    RetryLockOptions r;
    r.observer = semaphore_.observer;
    stack.retry = std::make_unique<RetryLock>(thread_->loop(), stack.semaphore.get(), r);
    done(absl::OkStatus());
  });
  if (!built.ok()) return built;
  stack.facade = std::make_unique<BlockingLock>(
      thread_, stack.retry.get(),
      blocking_internal::FacadeOptions(auto_renew_, semaphore_.observer));
  BlockingLock* out = stack.facade.get();
  stacks_.emplace(permits, std::move(stack));
  return out;
}

void PermitFacades::Shutdown() {
  MutexLock lock(&mu_);
  closed_ = true;
  for (auto& [n, stack] : stacks_) stack.facade->Shutdown();
}

void PermitFacades::DestroyOnLoop() {
  MutexLock lock(&mu_);
  for (auto& [n, stack] : stacks_) {
    stack.retry.reset();
    stack.semaphore.reset();
  }
}

}  // namespace dlock
