#include "dlock/transport/uv/cluster_router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/cluster_redirect.h"

namespace dlock {

struct ClusterRouter::Request {
  std::vector<std::string> argv;
  absl::Time deadline;
  ReplyCallback callback;
  int slot = -1;  // -1: no key, any master
  int redirects = 0;
  std::string ask_target;  // non-empty: ASKING + argv there, once
  std::string last_error;  // the last TRYAGAIN/CLUSTERDOWN, for the deadline
  // A script command: its body, and views of `argv` that a node's
  // SendScript may read until its callback has run (the request outlives
  // it: it is erased only after, or by Close, which closes the nodes at
  // once).
  absl::string_view script_body;
  std::vector<absl::string_view> script_views;
};

ClusterRouter::ClusterRouter(EventLoop* loop, const ClusterTransportOptions& options,
                             ClusterTopology* topology, ClusterNodes* nodes)
    : loop_(loop), options_(options), topology_(topology), nodes_(nodes), held_(loop) {}

ClusterRouter::~ClusterRouter() {
  for (TimerId t : timers_) loop_->Cancel(t);
}

void ClusterRouter::Route(std::vector<std::string> argv, int slot, absl::Duration timeout,
                          ReplyCallback callback, absl::string_view script_body) {
  const uint64_t id = next_id_++;
  auto r = std::make_unique<Request>();
  r->argv = std::move(argv);
  if (!script_body.empty()) {
    r->script_body = script_body;
    r->script_views.assign(r->argv.begin(), r->argv.end());
  }
  r->deadline = loop_->Now() + timeout;
  r->callback = std::move(callback);
  r->slot = slot;
  requests_[id] = std::move(r);
  if (topology_->loaded()) {
    Dispatch(id);
    return;
  }
  held_.Hold(id, timeout, [this](uint64_t id) {
    const absl::Status& why = topology_->last_error();
    Finish(id, absl::DeadlineExceededError(absl::StrCat(
                   "cluster slot map not loaded in time", why.ok() ? "" : ": ",
                   why.message())));
  });
  topology_->Refresh();
}

void ClusterRouter::MapLoaded() {
  for (uint64_t id : held_.TakeAll()) Dispatch(id);
}

void ClusterRouter::MapUnavailable(const absl::Status& status) {
  for (uint64_t id : held_.TakeAll()) FinishLater(id, status);
}

void ClusterRouter::Dispatch(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  const absl::Duration remaining = r.deadline - loop_->Now();
  if (remaining <= absl::ZeroDuration()) {
    FinishLater(id, absl::DeadlineExceededError(absl::StrCat(
                        "cluster command deadline passed",
                        r.last_error.empty() ? "" : " (last reply: ", r.last_error,
                        r.last_error.empty() ? "" : ")")));
    return;
  }
  std::string address = std::move(r.ask_target);
  const bool asking = !address.empty();
  r.ask_target.clear();
  if (!asking) {
    address = r.slot >= 0 ? topology_->map().OwnerOf(r.slot)
                          : nodes_->PreferConnected(topology_->map().Masters());
  }
  if (address.empty()) {
    // The map names no owner (a failover under way): ask again, until the
    // deadline.
    topology_->Refresh();
    r.last_error = absl::StrCat("no node serves slot ", r.slot);
    Later(options_.retry_delay, [this, id] { Dispatch(id); });
    return;
  }
  absl::StatusOr<Transport*> node = nodes_->Get(address);
  if (!node.ok()) {
    topology_->NoteError(node.status());
    topology_->Refresh();  // the map may name a node that is gone
    FinishLater(id, absl::UnavailableError(absl::StrCat(
                        "cluster: cannot reach ", address, ": ", node.status().message())));
    return;
  }
  if (asking) {
    // ASKING applies to the next command on this connection, which is ours:
    // both go out in order on the node's one command connection.
    (*node)->Send({"ASKING"}, remaining, [](absl::StatusOr<Reply>) {}).IgnoreError();
  }
  ReplyCallback on_reply = [this, life = std::weak_ptr<int>(life_),
                            id](absl::StatusOr<Reply> reply) {
    if (life.expired() || closed_) return;
    OnReply(id, std::move(reply));
  };
  absl::Status s;
  if (r.script_body.empty()) {
    s = (*node)->Send(r.argv, remaining, std::move(on_reply));
  } else if (asking) {
    // EVAL, not a SCRIPT LOAD that would take the ASKING for itself.
    std::vector<std::string> eval = r.argv;
    eval[0] = "EVAL";
    eval[1] = std::string(r.script_body);
    s = (*node)->Send(std::move(eval), remaining, std::move(on_reply));
  } else {
    s = (*node)->SendScript(r.script_body, r.script_views, remaining, std::move(on_reply));
  }
  if (!s.ok()) FinishLater(id, s);
}

void ClusterRouter::OnReply(uint64_t id, absl::StatusOr<Reply> reply) {
  using Kind = ClusterRedirect::Kind;
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  ClusterRedirect redirect = ClassifyClusterReply(reply);
  switch (redirect.kind) {
    case Kind::kResult:
      if (!reply.ok() && absl::IsUnavailable(reply.status())) {
        topology_->Refresh();  // a node went away?
      }
      Finish(id, std::move(reply));
      return;
    case Kind::kClusterDown:
      topology_->Refresh();
      [[fallthrough]];
    case Kind::kTryAgain:
      // A migration or failover under way: ask again until the deadline.
      r.last_error = reply->str;
      Later(options_.retry_delay, [this, id] { Dispatch(id); });
      return;
    case Kind::kMoved:
      if (++r.redirects > options_.max_redirects) {
        Finish(id, std::move(reply));
        return;
      }
      ++moved_;
      topology_->map().SetOwner(redirect.slot, redirect.target);
      topology_->Refresh();
      break;
    case Kind::kAsk:
      ++asked_;
      r.ask_target = std::move(redirect.target);
      break;
  }
  Dispatch(id);
}

void ClusterRouter::Finish(uint64_t id, absl::StatusOr<Reply> result) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  // May destroy the router's owner: nothing after it.
  std::move(r->callback)(std::move(result));
}

void ClusterRouter::Later(absl::Duration delay, absl::AnyInvocable<void()> fn) {
  auto timer = std::make_shared<TimerId>(0);
  *timer = loop_->RunAfter(delay, [this, life = std::weak_ptr<int>(life_), timer,
                                   fn = std::move(fn)]() mutable {
    if (life.expired()) return;
    timers_.erase(std::remove(timers_.begin(), timers_.end(), *timer), timers_.end());
    if (closed_) return;
    fn();
  });
  timers_.push_back(*timer);
}

void ClusterRouter::FinishLater(uint64_t id, absl::Status status) {
  Later(absl::ZeroDuration(),
        [this, id, status = std::move(status)] { Finish(id, status); });
}

std::vector<ReplyCallback> ClusterRouter::Close() {
  closed_ = true;
  for (TimerId t : timers_) loop_->Cancel(t);
  timers_.clear();
  held_.TakeAll();
  std::vector<ReplyCallback> callbacks;
  callbacks.reserve(requests_.size());
  for (auto& [id, r] : requests_) callbacks.push_back(std::move(r->callback));
  requests_.clear();
  return callbacks;
}

}  // namespace dlock
