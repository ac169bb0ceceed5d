#include "dlock/transport/fake/fake_redis_internal.h"

#include <climits>
#include <cstddef>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace fake_redis_internal {

// Redis compares most option words as C strings: bytes after a NUL are
// ignored. Mirror that, so an argument with a NUL behaves the same.
absl::string_view CStr(const std::string& s) {
  size_t nul = s.find('\0');
  return nul == std::string::npos ? absl::string_view(s)
                                  : absl::string_view(s.data(), nul);
}

bool Is(const std::string& arg, absl::string_view word) {
  return absl::EqualsIgnoreCase(CStr(arg), word);
}

// Redis's string2ll: no spaces, no '+', no leading zeros, at most 20 bytes.
bool ParseInt64(absl::string_view s, int64_t* out) {
  if (s.empty() || s.size() >= 21) return false;
  if (s.size() == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (i == s.size()) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  unsigned long long v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = s[i] - '0';
    if (v > ULLONG_MAX / 10) return false;
    v *= 10;
    if (v > ULLONG_MAX - d) return false;
    v += d;
  }
  if (negative) {
    if (v > static_cast<unsigned long long>(LLONG_MAX) + 1) return false;
    *out = static_cast<int64_t>(0 - v);
  } else {
    if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}

Reply FormatError(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  s = s.substr(b, e - b);
  for (char& c : s) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  if (!s.empty() && s[0] == '-') return Reply::Error(s.substr(1));
  return Reply::Error(absl::StrCat("ERR ", s));
}

// Replies Redis shares (shared.* objects).
Reply Ok() { return Reply::Status("OK"); }
Reply WrongType() {
  return Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value");
}
Reply NotInteger() { return Reply::Error("ERR value is not an integer or out of range"); }
Reply SyntaxError() { return Reply::Error("ERR syntax error"); }
Reply NoScript() { return Reply::Error("NOSCRIPT No matching script. Please use EVAL."); }
Reply ArityError(absl::string_view name) {
  return Reply::Error(absl::StrCat("ERR wrong number of arguments for '", name, "' command"));
}
Reply ExpireTimeError(absl::string_view name) {
  return Reply::Error(absl::StrCat("ERR invalid expire time in '", name, "' command"));
}

}  // namespace fake_redis_internal
}  // namespace dlock
