#include "dlock/cli/run_observer.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {
namespace cli {

void PrintLine(absl::string_view line) {
  std::fprintf(stderr, "dlock: %.*s\n", static_cast<int>(line.size()), line.data());
}

RunObserver::RunObserver(bool verbose, std::string resource)
    : verbose_(verbose), resource_(std::move(resource)), text_(PrintLine) {}

void RunObserver::OnAcquireWait(const AcquireWaitEvent& e) {
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

void RunObserver::OnAcquire(const AcquireEvent& e) {
  if (verbose_) text_.OnAcquire(e);
}

void RunObserver::OnRelease(const ReleaseEvent& e) {
  if (verbose_) text_.OnRelease(e);
}

void RunObserver::OnExtend(const ExtendEvent& e) {
  if (verbose_) text_.OnExtend(e);
}

void RunObserver::OnRenewal(const RenewalEvent& e) {
  if (e.status.ok() && on_renewed) on_renewed();
  if (verbose_) text_.OnRenewal(e);
}

void RunObserver::OnLeaseLost(const LeaseLostEvent& e) {
  if (verbose_) text_.OnLeaseLost(e);
}

void RunObserver::OnServerVote(const ServerVoteEvent& e) {
  if (verbose_) text_.OnServerVote(e);
}

}  // namespace cli
}  // namespace dlock
