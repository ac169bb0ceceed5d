#include "dlock/transport/reply.h"

#include <ostream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock {

std::string Reply::DebugString() const {
  switch (type) {
    case Type::kNil:
      return "nil";
    case Type::kInteger:
      return absl::StrCat("(integer) ", integer);
    case Type::kStatus:
      return absl::StrCat("(status) ", absl::CHexEscape(str));
    case Type::kString:
      return absl::StrCat("\"", absl::CHexEscape(str), "\"");
    case Type::kError:
      return absl::StrCat("(error) ", absl::CHexEscape(str));
    case Type::kArray:
      return absl::StrCat(
          "[",
          absl::StrJoin(elements, ", ",
                        [](std::string* out, const Reply& e) {
                          out->append(e.DebugString());
                        }),
          "]");
  }
  return "?";
}

bool operator==(const Reply& a, const Reply& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case Reply::Type::kNil:
      return true;
    case Reply::Type::kInteger:
      return a.integer == b.integer;
    case Reply::Type::kArray:
      return a.elements == b.elements;
    default:
      return a.str == b.str;
  }
}

std::ostream& operator<<(std::ostream& os, const Reply& r) {
  return os << r.DebugString();
}

}  // namespace dlock
