// This header defines `FakeSentLog`, a FakeTransport's record of what was
// sent on its connection: every command its Send and SendScript accepted, in
// order, whatever its fate (a script not yet loaded counts as two commands,
// `SCRIPT LOAD body` and its `EVALSHA`), and the counts tests ask of it.
// FakeTransport::sent(), CountSent and CountScriptRuns read it.
//
// Not thread-safe: call only on the thread running the transport's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_SENT_LOG_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_SENT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dlock {

class FakeSentLog {
 public:
  // At most kMaxSentLog entries are kept; past it the oldest half is
  // discarded.
  static constexpr size_t kMaxSentLog = 1000000;

  FakeSentLog() = default;
  FakeSentLog(const FakeSentLog&) = delete;
  FakeSentLog& operator=(const FakeSentLog&) = delete;

  const std::vector<std::vector<std::string>>& sent() const { return sent_; }
  // Appends one command.
  void Log(std::vector<std::string> argv);
  // How many logged commands are named `command` (case-insensitive).
  int64_t CountSent(absl::string_view command) const;
  // How many logged EVALSHA/EVAL commands run the script with this SHA-1.
  int64_t CountScriptRuns(absl::string_view sha1) const;
  void Clear() { sent_.clear(); }

 private:
  std::vector<std::vector<std::string>> sent_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_SENT_LOG_H_
