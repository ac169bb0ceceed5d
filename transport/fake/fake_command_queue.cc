#include "dlock/transport/fake/fake_command_queue.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace dlock {

uint64_t FakeCommandQueue::Add(absl::Duration timeout, ReplyCallback callback,
                               LateReplyHook on_late_reply) {
  const uint64_t id = next_id_++;
  Pending& p = requests_[id];
  p.callback = std::move(callback);
  if (on_late_reply != nullptr) late_.emplace(id, std::move(on_late_reply));
  p.timeout_task = tasks_->Schedule(timeout, [this, id] {
    Complete(id, absl::DeadlineExceededError("FakeTransport: no reply before the deadline"),
             /*timed_out=*/true);
  });
  return id;
}

bool FakeCommandQueue::Dispatch(uint64_t id, std::vector<std::string> argv,
                                std::string load_body,
                                std::vector<std::vector<std::string>> before) {
  if (faults_->partitioned()) {
    Answer(id, absl::UnavailableError("FakeTransport: partitioned"), absl::ZeroDuration());
    return false;
  }
  switch (faults_->TakeNext()) {
    case FakeFaultPlan::Fate::kFail:
      Answer(id, faults_->fail_outcome(),
             faults_->request_latency() + faults_->reply_latency());
      return false;
    case FakeFaultPlan::Fate::kDropRequest:
      return false;  // only the timeout will answer
    case FakeFaultPlan::Fate::kDropReply:
      Apply(id, std::move(argv), /*drop_reply=*/true, std::move(load_body), std::move(before));
      return true;
    case FakeFaultPlan::Fate::kApply:
      Apply(id, std::move(argv), /*drop_reply=*/false, std::move(load_body),
            std::move(before));
      return true;
  }
  return false;
}

void FakeCommandQueue::Apply(uint64_t id, std::vector<std::string> argv, bool drop_reply,
                             std::string load_body,
                             std::vector<std::vector<std::string>> before) {
  const absl::Time now = tasks_->loop()->Now();
  const absl::Time apply_at = std::max(now + faults_->request_latency(), last_apply_at_);
  last_apply_at_ = apply_at;
  unapplied_[id] = tasks_->Schedule(apply_at - now, [this, id, argv = std::move(argv),
                                                     drop_reply,
                                                     load_body = std::move(load_body),
                                                     before = std::move(before)]() mutable {
    RunApply(id, std::move(argv), drop_reply, std::move(load_body), std::move(before));
  });
}

void FakeCommandQueue::RunApply(uint64_t id, std::vector<std::string> argv, bool drop_reply,
                                std::string load_body,
                                std::vector<std::vector<std::string>> before) {
  unapplied_.erase(id);
  for (std::vector<std::string>& cmd : before) session_->Command(std::move(cmd));
  std::optional<Reply> load_error;
  if (!load_body.empty()) {
    std::vector<Reply> loaded = session_->Command({"SCRIPT", "LOAD", std::move(load_body)});
    if (!loaded.empty() && loaded.front().is_error()) load_error = loaded.front();
  }
  std::vector<Reply> replies = session_->Command(std::move(argv));
  if (load_error.has_value() && replies.front().IsErrorWithPrefix("NOSCRIPT")) {
    replies.front() = *std::move(load_error);
  }
  if (drop_reply) {
    late_.erase(id);
    return;
  }
  auto hook = late_.find(id);
  if (hook != late_.end()) {
    // The reply is read when it arrives; the hook sees it if the command
    // timed out by then (a delivered outcome removes the hook first).
    tasks_->Schedule(faults_->reply_latency(), [this, id, reply = replies.front()] {
      auto it = late_.find(id);
      if (it == late_.end()) return;
      LateReplyHook h = std::move(it->second);
      late_.erase(it);
      if (requests_.count(id) == 0) std::move(h)(reply);
    });
  }
  if (requests_.count(id) == 0) return;  // timed out: only the hook hears it
  Answer(id, std::move(replies.front()), faults_->reply_latency());
}

void FakeCommandQueue::Answer(uint64_t id, absl::StatusOr<Reply> outcome,
                              absl::Duration delay) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const absl::Time now = tasks_->loop()->Now();
  const absl::Time at = std::max(now + delay, last_deliver_at_);
  last_deliver_at_ = at;
  tasks_->Cancel(it->second.deliver_task);
  it->second.deliver_task =
      tasks_->Schedule(at - now, [this, id, outcome = std::move(outcome)]() mutable {
        Complete(id, std::move(outcome));
      });
}

void FakeCommandQueue::Complete(uint64_t id, absl::StatusOr<Reply> outcome, bool timed_out) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  ReplyCallback callback = std::move(it->second.callback);
  tasks_->Cancel(it->second.timeout_task);
  tasks_->Cancel(it->second.deliver_task);
  requests_.erase(it);
  if (!timed_out) late_.erase(id);
  // Last: the callback may destroy the owner (and this queue).
  std::move(callback)(std::move(outcome));
}

void FakeCommandQueue::DropInFlight(const absl::Status& why) {
  for (auto& [id, task] : unapplied_) tasks_->Cancel(task);
  unapplied_.clear();
  late_.clear();  // the connection is gone: no reply will be read
  std::vector<uint64_t> ids;
  for (auto& [id, p] : requests_) ids.push_back(id);
  for (uint64_t id : ids) Answer(id, why, absl::ZeroDuration());
}

std::vector<ReplyCallback> FakeCommandQueue::TakeAll() {
  std::vector<ReplyCallback> callbacks;
  for (auto& [id, p] : requests_) callbacks.push_back(std::move(p.callback));
  requests_.clear();
  unapplied_.clear();
  late_.clear();
  return callbacks;
}

}  // namespace dlock
