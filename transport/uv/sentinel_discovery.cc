#include "dlock/transport/uv/sentinel_discovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

constexpr absl::Duration kBackoffMin = absl::Milliseconds(200);
constexpr absl::Duration kBackoffMax = absl::Seconds(2);

}  // namespace

SentinelDiscovery::SentinelDiscovery(EventLoop* loop, const SentinelTransportOptions& options,
                                     SentinelConnectionFactory* factory,
                                     SentinelSet* sentinels, SentinelMaster* master,
                                     Outcomes outcomes)
    : loop_(loop),
      options_(options),
      factory_(factory),
      sentinels_(sentinels),
      master_(master),
      outcomes_(std::move(outcomes)) {}

SentinelDiscovery::~SentinelDiscovery() { Stop(); }

void SentinelDiscovery::Discover() {
  if (stopped_) return;
  if (discovering_) {
    again_ = true;
    return;
  }
  discovering_ = true;
  again_ = false;
  round_errors_.clear();
  if (retry_timer_ != 0) {
    loop_->Cancel(retry_timer_);
    retry_timer_ = 0;
  }
  AskSentinel(0);
}

void SentinelDiscovery::NoteRoundError(size_t index, absl::string_view what) {
  const SentinelTransportOptions::Endpoint& e = options_.sentinels[index];
  absl::StrAppend(&round_errors_, round_errors_.empty() ? "" : "; ", "sentinel ",
                  SentinelHostPort(e.host, e.port), ": ", what);
}

void SentinelDiscovery::AskSentinel(size_t index) {
  if (index >= sentinels_->size()) {
    RoundFailed();
    return;
  }
  absl::Status s = sentinels_->at(index).Send(
      {"SENTINEL", "get-master-addr-by-name", options_.master_name}, options_.query_timeout,
      [this, life = std::weak_ptr<int>(life_), index](absl::StatusOr<Reply> reply) {
        if (life.expired() || stopped_) return;
        OnSentinelAnswer(index, std::move(reply));
      });
  if (!s.ok()) {
    NoteRoundError(index, s.ToString());
    AskSentinel(index + 1);
  }
}

void SentinelDiscovery::OnSentinelAnswer(size_t index, absl::StatusOr<Reply> reply) {
  if (!reply.ok()) {
    NoteRoundError(index, reply.status().ToString());
  } else if (reply->is_nil()) {
    NoteRoundError(index, absl::StrCat("knows no master named '", options_.master_name,
                                       "'"));
  } else if (reply->is_error()) {
    NoteRoundError(index, reply->str);
  } else if (reply->is_array() && reply->elements.size() == 2 &&
             reply->elements[0].is_string() && reply->elements[1].is_string()) {
    int port = 0;
    if (absl::SimpleAtoi(reply->elements[1].str, &port) && port >= 1 && port <= 65535) {
      CheckRole(index, reply->elements[0].str, port);
      return;
    }
    NoteRoundError(index, absl::StrCat("bad port in reply: ", reply->DebugString()));
  } else {
    NoteRoundError(index, absl::StrCat("unexpected reply: ", reply->DebugString()));
  }
  AskSentinel(index + 1);
}

void SentinelDiscovery::CheckRole(size_t index, std::string host, int port) {
  const bool same = master_->Is(host, port);
  Transport* target = master_->get();
  if (!same) {
    absl::StatusOr<std::unique_ptr<Transport>> c = (*factory_)(host, port, false);
    if (!c.ok()) {
      NoteRoundError(index, absl::StrCat("names ", SentinelHostPort(host, port), ": ",
                                         c.status().ToString()));
      AskSentinel(index + 1);
      return;
    }
    candidate_ = *std::move(c);
    target = candidate_.get();
  }
  absl::Status s = target->Send(
      {"ROLE"}, options_.query_timeout,
      [this, life = std::weak_ptr<int>(life_), index, host, port,
       same](absl::StatusOr<Reply> reply) {
        if (life.expired() || stopped_) return;
        OnRole(index, host, port, same, std::move(reply));
      });
  if (!s.ok()) {
    NoteRoundError(index, absl::StrCat("names ", SentinelHostPort(host, port), ", ROLE: ",
                                       s.ToString()));
    if (!same) master_->Bury(std::move(candidate_));
    AskSentinel(index + 1);
  }
}

void SentinelDiscovery::OnRole(size_t index, std::string host, int port, bool same,
                               absl::StatusOr<Reply> reply) {
  std::weak_ptr<int> life = life_;
  const bool is_master = reply.ok() && reply->is_array() && !reply->elements.empty() &&
                         (reply->elements[0].is_string() || reply->elements[0].is_status()) &&
                         reply->elements[0].str == "master";
  if (is_master) {
    if (!same) {
      outcomes_.new_master(std::move(candidate_), std::move(host), port);
      if (life.expired()) return;
    }
    discovering_ = false;
    backoff_ = absl::ZeroDuration();
    last_error_ = absl::OkStatus();
    outcomes_.confirmed();
    if (life.expired() || stopped_) return;
    if (again_) Discover();
    return;
  }
  std::string role;
  if (!reply.ok()) {
    role = reply.status().ToString();
  } else if (reply->is_array() && !reply->elements.empty()) {
    role = absl::StrCat("ROLE says ", reply->elements[0].str);
  } else {
    role = absl::StrCat("unexpected ROLE reply ", reply->DebugString());
  }
  NoteRoundError(index, absl::StrCat("names ", SentinelHostPort(host, port),
                                     ", not a master: ", role));
  if (same && reply.ok()) {
    outcomes_.demoted();
    if (life.expired()) return;
  } else if (!same) {
    master_->Bury(std::move(candidate_));
    if (life.expired()) return;
  }
  AskSentinel(index + 1);
}

void SentinelDiscovery::RoundFailed() {
  discovering_ = false;
  last_error_ = absl::UnavailableError(absl::StrCat(
      "Sentinel: no master found for '", options_.master_name, "' (", round_errors_, ")"));
  if (master_->get() == nullptr || again_) {
    backoff_ = backoff_ == absl::ZeroDuration() ? kBackoffMin
                                                : std::min(backoff_ * 2, kBackoffMax);
    retry_timer_ = loop_->RunAfter(backoff_, [this] {
      retry_timer_ = 0;
      Discover();
    });
  }
  again_ = false;
  const absl::Status failure = last_error_;
  outcomes_.failed(failure);
}

void SentinelDiscovery::Stop() {
  stopped_ = true;
  if (retry_timer_ != 0) loop_->Cancel(retry_timer_);
  retry_timer_ = 0;
}

void SentinelDiscovery::CloseCandidate() {
  if (candidate_ != nullptr) candidate_->Close();
}

}  // namespace dlock
