// This header defines `ErrorText()` and `ErrorStatus()`: error messages
// built by ONE out-of-line call from a format with `%` placeholders,
//
//   return ErrorStatus(absl::StatusCode::kInvalidArgument,
//                      "ttl % is outside [%, %]", {ttl, min, max_ttl});
//
// rather than absl::StrCat with its inlined pieces and temporaries (each
// FormatDuration a std::string to destroy) at every call site. Error text is
// cold code, yet it was a tenth of what a small program linked of dlock
// (bench/footprint, bench/RESULTS.md); here a message costs its format
// string and a few bytes per argument.
//
// Each `%` takes the next argument, rendered as absl::StrCat renders it
// (strings as they are, integers in decimal, doubles with six significant
// digits) and absl::Duration as absl::FormatDuration does. A `%` with no
// argument left is kept as it is; arguments left over are ignored. Text
// arguments are not scanned for `%`.
//
// Internal to dlock. Thread-safe (pure functions).
#ifndef DLOCK_LOCK_ERROR_TEXT_H_
#define DLOCK_LOCK_ERROR_TEXT_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// One argument of ErrorText: a view of text, a number or a duration. Holds
// no copy: it lives as long as the call it is passed to.
class TextArg {
 public:
  enum class Kind : uint8_t { kText, kInt, kDouble, kDuration };

  TextArg(absl::string_view text) : kind_(Kind::kText), text_(text) {}  // NOLINT
  TextArg(const char* text) : TextArg(absl::string_view(text)) {}       // NOLINT
  TextArg(const std::string& text) : TextArg(absl::string_view(text)) {}  // NOLINT
  TextArg(int v) : kind_(Kind::kInt), int_(v) {}                        // NOLINT
  TextArg(long v) : kind_(Kind::kInt), int_(v) {}                       // NOLINT
  TextArg(long long v) : kind_(Kind::kInt), int_(v) {}                  // NOLINT
  TextArg(unsigned v) : kind_(Kind::kInt), int_(v) {}                   // NOLINT
  TextArg(unsigned long v) : kind_(Kind::kInt), int_(static_cast<int64_t>(v)) {}  // NOLINT
  TextArg(double v) : kind_(Kind::kDouble), double_(v) {}               // NOLINT
  TextArg(absl::Duration d) : kind_(Kind::kDuration), duration_(d) {}   // NOLINT

  // Appends this argument, rendered, to `out`.
  void AppendTo(std::string& out) const;

 private:
  Kind kind_;
  union {
    absl::string_view text_;
    int64_t int_;
    double double_;
    absl::Duration duration_;
  };
};

// `format` with each `%` replaced by the next argument.
std::string ErrorText(absl::string_view format, std::initializer_list<TextArg> args);

// absl::Status(code, ErrorText(format, args)).
absl::Status ErrorStatus(absl::StatusCode code, absl::string_view format,
                         std::initializer_list<TextArg> args);

}  // namespace dlock

#endif  // DLOCK_LOCK_ERROR_TEXT_H_
