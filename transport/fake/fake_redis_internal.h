// Internal to //transport/fake: helpers shared by the files that implement
// FakeRedis (the command families in fake_redis_*.cc and the Lua engine):
// Redis's argument parsing and its shared error replies. Not a public API.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_INTERNAL_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

// Redis compares most option words as C strings: bytes after a NUL are
// ignored. Mirror that, so an argument with a NUL behaves the same.
absl::string_view CStr(const std::string& s);

// Whether `arg` (as a C string) equals `word`, ignoring case.
bool Is(const std::string& arg, absl::string_view word);

// Redis's string2ll: no spaces, no '+', no leading zeros, at most 20 bytes.
bool ParseInt64(absl::string_view s, int64_t* out);

// Redis's addReplyErrorFormat: trims CR/LF at both ends, turns inner ones
// into spaces, and prefixes "ERR " unless the text starts with '-' (which
// is dropped).
Reply FormatError(std::string s);

// Replies Redis shares (shared.* objects).
Reply Ok();
Reply WrongType();
Reply NotInteger();
Reply SyntaxError();
Reply NoScript();
Reply ArityError(absl::string_view name);
Reply ExpireTimeError(absl::string_view name);

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_INTERNAL_H_
