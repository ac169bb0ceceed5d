// The parts of script.h that hash: Sha1Hex and the Script constructor that
// computes its SHA-1. A separate target (//transport:script_sha1) so the
// core, whose scripts carry constant SHA-1s, links no libcrypto.
#include <openssl/sha.h>

#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/script.h"

namespace dlock {

// OpenSSL's SHA-1 rather than a hand-written one: it is already a Debian
// package every server has, and it is checked far better than ours would be.
std::string Sha1Hex(absl::string_view data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

Script::Script(std::string source) : Script(source, Sha1Hex(source)) {}

}  // namespace dlock
