#include "dlock/lock/error_text.h"

#include "absl/strings/str_cat.h"

namespace dlock {

void TextArg::AppendTo(std::string& out) const {
  switch (kind_) {
    case Kind::kText:
      out.append(text_.data(), text_.size());
      return;
    case Kind::kInt:
      absl::StrAppend(&out, int_);
      return;
    case Kind::kDouble:
      absl::StrAppend(&out, double_);
      return;
    case Kind::kDuration:
      out += absl::FormatDuration(duration_);
      return;
  }
}

std::string ErrorText(absl::string_view format, std::initializer_list<TextArg> args) {
  std::string out;
  const TextArg* next = args.begin();
  for (char c : format) {
    if (c == '%' && next != args.end()) {
      (next++)->AppendTo(out);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::Status ErrorStatus(absl::StatusCode code, absl::string_view format,
                         std::initializer_list<TextArg> args) {
  return absl::Status(code, ErrorText(format, args));
}

}  // namespace dlock
