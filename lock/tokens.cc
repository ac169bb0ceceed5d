#include "dlock/lock/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstddef>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace dlock {

namespace {

constexpr size_t kTokenBytes = 16;

// Fills `buf` from getrandom(2), retrying short reads and EINTR. False when
// the call is missing or fails otherwise.
bool FromGetrandom(unsigned char* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = getrandom(buf + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool FromDevUrandom(unsigned char* buf, size_t size) {
  int fd;
  do {
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  size_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  return got == size;
}

}  // namespace

std::string NewToken() {
  unsigned char bytes[kTokenBytes];
  if (!FromGetrandom(bytes, sizeof(bytes)) && !FromDevUrandom(bytes, sizeof(bytes))) {
    // Practically unreachable; an OS-seeded generator rather than failing
    // the acquisition.
    absl::BitGen gen;
    for (unsigned char& b : bytes) b = absl::Uniform<unsigned char>(gen);
  }
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  // Never keep a handed-out token in memory longer than needed.
  explicit_bzero(bytes, sizeof(bytes));
  return hex;
}

}  // namespace dlock
