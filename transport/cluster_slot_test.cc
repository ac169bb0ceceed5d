#include "dlock/transport/cluster_slot.h"

#include <string>

#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(Crc16Test, RedisReferenceVector) {
  // Redis's src/crc16.c documents this check value for its CRC16 variant.
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  EXPECT_EQ(Crc16(""), 0);
}

TEST(KeySlotTest, KnownSlots) {
  // Slots as `CLUSTER KEYSLOT` reports them (also checked against a real
  // server in //lock:keys_cluster_test).
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));  // empty first tag: whole key
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
}

TEST(HashTagOfTest, Rules) {
  EXPECT_EQ(HashTagOf("abc"), "abc");
  EXPECT_EQ(HashTagOf("a{b}c"), "b");
  EXPECT_EQ(HashTagOf("a{}c"), "a{}c");
  EXPECT_EQ(HashTagOf("a{bc"), "a{bc");
  EXPECT_EQ(HashTagOf("a}b{c}"), "c");
  EXPECT_EQ(HashTagOf(std::string("x{\0}", 4)), std::string("\0", 1));
}

TEST(SlotTagTest, EverySlotHasAShortBracelessTag) {
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    const std::string& tag = SlotTag(slot);
    ASSERT_FALSE(tag.empty()) << slot;
    ASSERT_LE(tag.size(), 4u) << slot;
    ASSERT_EQ(tag.find_first_of("{}"), std::string::npos) << slot;
    ASSERT_EQ(KeySlot(tag), slot) << slot;
    ASSERT_EQ(KeySlot("p:{" + tag + "}:x"), slot) << slot;
  }
}

}  // namespace
}  // namespace dlock
