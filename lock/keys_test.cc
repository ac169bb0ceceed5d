// ResourceKeys builds the same keys as KeyScheme, inline or not.
#include "dlock/lock/keys.h"

#include <string>

#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(ResourceKeysTest, SameKeysAsKeyScheme) {
  for (const std::string& prefix : {std::string("dlock:"), std::string(""), std::string(200, 'p')}) {
    for (const std::string& resource :
         {std::string("r"), std::string("orders/42"), std::string("a\0b", 3), std::string(300, 'r')}) {
      KeyScheme scheme{prefix};
      ResourceKeys keys(prefix, resource);
      EXPECT_EQ(keys.lock(), scheme.LockKey(resource));
      EXPECT_EQ(keys.fence(), scheme.FenceKey(resource));
      EXPECT_EQ(keys.channel(), scheme.ChannelKey(resource));
    }
  }
}

}  // namespace
}  // namespace dlock
