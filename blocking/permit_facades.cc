#include "dlock/blocking/permit_facades.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/blocking/post_and_wait.h"

namespace dlock {

PermitFacades::PermitFacades(LoopThread* thread, Transport* transport,
                             PermitFacadesOptions options)
    : thread_(thread), transport_(transport), options_(std::move(options)) {}

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
    SemaphoreOptions s;
    s.permits = permits;
    s.key_prefix = options_.key_prefix;
    s.command_timeout = options_.command_timeout;
    s.observer = options_.observer;
    stack.semaphore = std::make_unique<Semaphore>(thread_->loop(), transport_, s);
    RetryLockOptions r;
    r.observer = options_.observer;
    stack.retry = std::make_unique<RetryLock>(thread_->loop(), stack.semaphore.get(), r);
    done(absl::OkStatus());
  });
  if (!built.ok()) return built;
  BlockingLockOptions facade;
  facade.auto_renew = options_.auto_renew;
  facade.renewal.watchdog.observer = options_.observer;
  stack.facade = std::make_unique<BlockingLock>(thread_, stack.retry.get(), std::move(facade));
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
