// The key layout against a real cluster-enabled redis-server's CLUSTER
// KEYSLOT (the server's own hashing, not ours): every key of a resource in
// one slot for awkward names, and our KeySlot agrees with the server.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/testing/redis_server.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

class KeysClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_support::RedisServerOptions o;
    // The cluster bus port defaults to port + 10000, too high for a free
    // client port above 55535: pick one.
    auto bus = test_support::PickFreeLoopbackPort();
    ASSERT_TRUE(bus.ok()) << bus.status();
    o.extra_args = {"--cluster-enabled", "yes", "--cluster-port", std::to_string(*bus)};
    o.trusted_data_set_prefixes.clear();  // a node without slots takes no SET
    auto s = test_support::RedisServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  int ServerSlot(const std::string& key) {
    auto r = server_->Command({"CLUSTER", "KEYSLOT", key});
    EXPECT_TRUE(r.ok() && r->is_integer()) << (r.ok() ? r->DebugString() : r.status().ToString());
    return r.ok() ? static_cast<int>(r->integer) : -1;
  }

  std::unique_ptr<test_support::RedisServer> server_;
};

TEST_F(KeysClusterTest, EveryKeyOfAResourceInTheServersOneSlot) {
  const std::vector<std::string> names = {
      "orders/42", "}",  "}x", "}}", "{", "{}", "{x}", "a{b}c", "a}b", "x{", "}{x}",
      "{}}", std::string("\0", 1), std::string("}\0{", 3), std::string("\xff\xfe}", 3),
      std::string("\r\n", 2), ""};
  for (const bool per_slot : {false, true}) {
    for (const std::string prefix : {"dlock:", "app{", "a{b}:"}) {
      KeyScheme k{prefix, per_slot};
      for (const std::string& r : names) {
        const std::string lock = k.LockKey(r);
        const int slot = ServerSlot(lock);
        EXPECT_EQ(KeySlot(lock), slot) << lock;
        std::vector<std::string> keys = {k.FenceKey(r), k.ChannelKey(r), lock + ":acquire:q"};
        // An unclosed '{' in the prefix cannot be clustered (keys.h).
        if (per_slot && prefix != "app{") keys.push_back(k.DataSetKey(r));
        for (const std::string& key : keys) {
          EXPECT_EQ(ServerSlot(key), slot)
              << "prefix '" << prefix << "' resource '" << r << "': " << key << " vs " << lock;
        }
      }
    }
  }
}

TEST_F(KeysClusterTest, SlotTagsAgreeWithTheServer) {
  KeyScheme k{"dlock:", true};
  for (int slot = 0; slot < kClusterSlots; slot += 97) {
    EXPECT_EQ(ServerSlot(k.SlotDataSetKey(slot)), slot);
  }
  EXPECT_EQ(ServerSlot("123456789"), 0x31C3 % kClusterSlots);
}

}  // namespace
}  // namespace dlock
