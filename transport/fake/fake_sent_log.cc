#include "dlock/transport/fake/fake_sent_log.h"

#include <cstddef>
#include <utility>

#include "absl/strings/match.h"
#include "dlock/transport/script.h"

namespace dlock {

void FakeSentLog::Log(std::vector<std::string> argv) {
  if (sent_.size() >= kMaxSentLog) {
    sent_.erase(sent_.begin(), sent_.begin() + static_cast<std::ptrdiff_t>(sent_.size() / 2 + 1));
  }
  sent_.push_back(std::move(argv));
}

int64_t FakeSentLog::CountSent(absl::string_view command) const {
  int64_t n = 0;
  for (const auto& argv : sent_) {
    if (absl::EqualsIgnoreCase(argv[0], command)) ++n;
  }
  return n;
}

int64_t FakeSentLog::CountScriptRuns(absl::string_view sha1) const {
  int64_t n = 0;
  for (const auto& argv : sent_) {
    if (argv.size() < 2) continue;
    if (absl::EqualsIgnoreCase(argv[0], "evalsha") && absl::EqualsIgnoreCase(argv[1], sha1)) {
      ++n;
    } else if (absl::EqualsIgnoreCase(argv[0], "eval") &&
               absl::EqualsIgnoreCase(Sha1Hex(argv[1]), sha1)) {
      ++n;
    }
  }
  return n;
}

}  // namespace dlock
