// KeyScheme layout: every key of a resource in one Redis Cluster slot, the
// layout one-to-one, the classic layout kept where it was sound. The same
// names are checked against a real server's CLUSTER KEYSLOT in
// keys_cluster_test.cc.
#include "dlock/lock/keys.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

std::vector<std::string> AwkwardNames() {
  return {"orders/42", "}", "}x", "}}", "{", "{}", "{x}", "a{b}c", "a}b",
          "x{", "}{x}", "{}}", std::string("\0", 1), std::string("}\0{", 3),
          std::string("\xff\xfe}", 3), "", "ééé"};
}

std::vector<std::string> AllKeys(const KeyScheme& k, const std::string& r) {
  return {k.LockKey(r), k.FenceKey(r), k.ChannelKey(r), k.LockKey(r) + ":acquire:x",
          k.DataSetKey(r)};
}

TEST(KeySchemeTest, EveryKeyOfAResourceInOneSlot) {
  for (const bool per_slot : {false, true}) {
    for (const std::string prefix : {"dlock:", "app{", "a{b}:", "", "}"}) {
      KeyScheme k{prefix, per_slot};
      for (const std::string& r : AwkwardNames()) {
        const int slot = KeySlot(k.LockKey(r));
        for (const std::string& key : AllKeys(k, r)) {
          if (!per_slot && key == k.DataSetKey()) continue;  // one per server
          // An unclosed '{' in the prefix cannot be clustered (keys.h).
          if (prefix == "app{" && key == k.DataSetKey(r)) continue;
          EXPECT_EQ(KeySlot(key), slot) << "prefix '" << prefix << "' resource '"
                                        << r << "' key '" << key << "'";
        }
      }
    }
  }
}

TEST(KeySchemeTest, ClassicLayoutKeptWhereItWasSound) {
  KeyScheme k;
  EXPECT_EQ(k.LockKey("orders/42"), "dlock:{orders/42}");
  EXPECT_EQ(k.FenceKey("a}b"), "dlock:{a}b}:fence");
  EXPECT_EQ(k.ChannelKey("{x}"), "dlock:{{x}}:released");
  EXPECT_EQ(k.DataSetKey("anything"), "dlock:data-set-began");
}

TEST(KeySchemeTest, EmptyTagNamesMoveToATaggedLayout) {
  KeyScheme k;
  const std::string tag = SlotTag(Crc16("}x") % kClusterSlots);
  EXPECT_EQ(k.LockKey("}x"), "dlock:#{" + tag + "}:lock:}x");
  EXPECT_EQ(k.FenceKey("}x"), "dlock:#{" + tag + "}:fence:}x");
  EXPECT_EQ(k.ChannelKey("}x"), "dlock:#{" + tag + "}:released:}x");
}

TEST(KeySchemeTest, PerSlotMarkerInTheResourcesSlot) {
  KeyScheme k{"dlock:", true};
  const int slot = KeySlot(k.LockKey("orders/42"));
  EXPECT_EQ(k.DataSetKey("orders/42"), "dlock:data-set-began:{" + SlotTag(slot) + "}");
  const std::vector<std::vector<std::string>> trust = TrustClusterDataSetCommands(k);
  ASSERT_EQ(trust.size(), static_cast<size_t>(kClusterSlots));
  absl::flat_hash_set<int> slots;
  for (const auto& cmd : trust) slots.insert(KeySlot(cmd[1]));
  EXPECT_EQ(slots.size(), static_cast<size_t>(kClusterSlots));
  EXPECT_EQ(trust[slot][1], k.DataSetKey("orders/42"));
}

TEST(KeySchemeTest, OneToOne) {
  absl::flat_hash_set<std::string> seen;
  KeyScheme k;
  std::vector<std::string> names = AwkwardNames();
  for (const std::string& a : AwkwardNames()) {
    names.push_back(a + ":fence");
    names.push_back("}" + a);
    names.push_back(a + "}");
    names.push_back("lock:" + a);
  }
  absl::flat_hash_set<std::string> unique_names(names.begin(), names.end());
  for (const std::string& r : unique_names) {
    for (const std::string& key : {k.LockKey(r), k.FenceKey(r), k.ChannelKey(r)}) {
      EXPECT_TRUE(seen.insert(key).second) << "'" << key << "' for '" << r << "'";
    }
  }
  EXPECT_FALSE(seen.contains(k.DataSetKey()));
}

// ResourceKeys (the lean path's stack buffer) builds the same keys as
// KeyScheme, inline or not, in either layout.
TEST(ResourceKeysTest, SameKeysAsKeyScheme) {
  std::vector<std::string> names = AwkwardNames();
  names.push_back(std::string(300, 'r'));
  for (const std::string& prefix :
       {std::string("dlock:"), std::string(""), std::string(200, 'p'), std::string("a{b}:"),
        std::string("}")}) {
    for (const std::string& resource : names) {
      KeyScheme scheme{prefix};
      ResourceKeys keys(prefix, resource);
      EXPECT_EQ(keys.lock(), scheme.LockKey(resource)) << prefix << " " << resource;
      EXPECT_EQ(keys.fence(), scheme.FenceKey(resource)) << prefix << " " << resource;
      EXPECT_EQ(keys.channel(), scheme.ChannelKey(resource)) << prefix << " " << resource;
    }
  }
}

}  // namespace
}  // namespace dlock
