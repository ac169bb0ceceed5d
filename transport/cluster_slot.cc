#include "dlock/transport/cluster_slot.h"

#include <array>
#include <vector>

namespace dlock {
namespace {

// The CRC16 lookup table, computed at compile time from the polynomial.
struct Crc16Table {
  std::array<uint16_t, 256> v{};
  constexpr Crc16Table() {
    for (int i = 0; i < 256; ++i) {
      uint16_t crc = static_cast<uint16_t>(i << 8);
      for (int bit = 0; bit < 8; ++bit) {
        crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                             : static_cast<uint16_t>(crc << 1);
      }
      v[i] = crc;
    }
  }
};
constexpr Crc16Table kTable;

// Every slot's tag: base-36 numerals in order of length then value, the
// first to land in each slot wins (all 16384 slots are covered by strings of
// at most 4 characters).
std::vector<std::string> BuildSlotTags() {
  constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::vector<std::string> tags(kClusterSlots);
  int missing = kClusterSlots;
  for (int len = 1; len <= 4 && missing > 0; ++len) {
    int count = 1;
    for (int i = 0; i < len; ++i) count *= 36;
    std::string s(len, '0');
    for (int n = 0; n < count && missing > 0; ++n) {
      int x = n;
      for (int i = len - 1; i >= 0; --i) {
        s[i] = kDigits[x % 36];
        x /= 36;
      }
      std::string& tag = tags[Crc16(s) & (kClusterSlots - 1)];
      if (tag.empty()) {
        tag = s;
        --missing;
      }
    }
  }
  return tags;
}

}  // namespace

uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kTable.v[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

absl::string_view HashTagOf(absl::string_view key) {
  const size_t open = key.find('{');
  if (open == absl::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == absl::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int KeySlot(absl::string_view key) {
  return Crc16(HashTagOf(key)) & (kClusterSlots - 1);
}

const std::string& SlotTag(int slot) {
  // Built on first use; function-local statics are initialised thread-safely.
  static const std::vector<std::string>* const tags =
      new std::vector<std::string>(BuildSlotTags());
  return (*tags)[slot];
}

}  // namespace dlock
