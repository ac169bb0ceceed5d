// This header defines `Reply`, an owned copy of one Redis (RESP2) reply.
//
// A `Reply` is what a `Transport` hands to a command's callback when the
// server answered. Error replies (`-ERR ...`) are replies too, of type
// `kError`: the server did answer. A transport failure (no answer, timeout,
// shutdown) is an `absl::Status` instead, never a `Reply`.
//
// RESP2 has one nil: a nil bulk string and a nil array are both `kNil`.
// Strings are byte strings: they may hold any byte, NUL included.
//
// This type is a plain value: copyable, movable, thread-compatible.
#ifndef DLOCK_TRANSPORT_REPLY_H_
#define DLOCK_TRANSPORT_REPLY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace dlock {

struct Reply {
  enum class Type { kNil, kInteger, kStatus, kString, kError, kArray };

  Type type = Type::kNil;
  int64_t integer = 0;         // kInteger
  std::string str;             // kStatus, kString (bulk), kError (without '-')
  std::vector<Reply> elements; // kArray

  static Reply Nil() { return Reply(); }
  static Reply Integer(int64_t v) {
    Reply r;
    r.type = Type::kInteger;
    r.integer = v;
    return r;
  }
  static Reply Status(std::string s) { return Make(Type::kStatus, std::move(s)); }
  static Reply String(std::string s) { return Make(Type::kString, std::move(s)); }
  static Reply Error(std::string s) { return Make(Type::kError, std::move(s)); }
  static Reply Array(std::vector<Reply> elements) {
    Reply r;
    r.type = Type::kArray;
    r.elements = std::move(elements);
    return r;
  }

  bool is_nil() const { return type == Type::kNil; }
  bool is_integer() const { return type == Type::kInteger; }
  bool is_status() const { return type == Type::kStatus; }
  bool is_string() const { return type == Type::kString; }
  bool is_error() const { return type == Type::kError; }
  bool is_array() const { return type == Type::kArray; }

  // True for an error reply whose text starts with `prefix` (e.g. "NOSCRIPT").
  bool IsErrorWithPrefix(absl::string_view prefix) const {
    return type == Type::kError && absl::string_view(str).substr(0, prefix.size()) == prefix;
  }

  // A one-line, unambiguous rendering (bytes escaped), for tests and logs:
  // nil, (integer) 5, (status) OK, "bulk", (error) ERR x, [a, b].
  std::string DebugString() const;

  friend bool operator==(const Reply& a, const Reply& b);
  friend bool operator!=(const Reply& a, const Reply& b) { return !(a == b); }

 private:
  static Reply Make(Type t, std::string s) {
    Reply r;
    r.type = t;
    r.str = std::move(s);
    return r;
  }
};

// Prints `DebugString()`; lets gtest show replies.
std::ostream& operator<<(std::ostream& os, const Reply& r);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_REPLY_H_
