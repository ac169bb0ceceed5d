#include "dlock/testing/redis_cluster.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace test_support {
namespace {

TEST(RedisClusterTest, FormsMovesASlotAndFailsOver) {
  auto started = RedisCluster::Start({});
  ASSERT_TRUE(started.ok()) << started.status();
  RedisCluster& c = **started;
  ASSERT_EQ(c.size(), 6);
  EXPECT_THAT(c.url(), ::testing::StartsWith("redis-cluster://127.0.0.1:"));
  // Every slot has an owner; the trusted marker is in place.
  const int slot = KeySlot("k");
  auto owner = c.OwnerOf(slot);
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto got = c.Command(*owner, {"GET", "dlock:data-set-began:{" + SlotTag(slot) + "}"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->str, "0");
  ASSERT_TRUE(c.Command(*owner, {"SET", "k", "v"}).ok());

  // Move the slot to another master, key and all.
  int to = -1;
  for (int s = 0; s < kClusterSlots; s += 4000) {
    auto o = c.OwnerOf(s);
    if (o.ok() && *o != *owner) to = *o;
  }
  ASSERT_GE(to, 0);
  ASSERT_THAT(c.BeginSlotMigration(slot, to), IsOk());
  auto ask = c.Command(to, {"GET", "k"});
  ASSERT_TRUE(ask.ok());
  EXPECT_THAT(ask->str, ::testing::StartsWith("MOVED"));  // not ASKING
  ASSERT_THAT(c.MigrateKeys(slot, to), IsOk());
  auto asked = c.Command(*owner, {"GET", "k"});
  ASSERT_TRUE(asked.ok());
  EXPECT_THAT(asked->str, ::testing::StartsWith("ASK"));
  ASSERT_THAT(c.FinishSlotMigration(slot, to), IsOk());
  EXPECT_THAT(c.OwnerOf(slot), IsOkAndHolds(to));
  auto moved = c.Command(*owner, {"GET", "k"});
  ASSERT_TRUE(moved.ok());
  EXPECT_THAT(moved->str, ::testing::StartsWith("MOVED"));
  auto v = c.Command(to, {"GET", "k"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->str, "v");

  // Fail the new owner over to its replica.
  auto promoted = c.Failover(to);
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  EXPECT_THAT(c.OwnerOf(slot), IsOkAndHolds(*promoted));
}

}  // namespace
}  // namespace test_support
}  // namespace dlock
