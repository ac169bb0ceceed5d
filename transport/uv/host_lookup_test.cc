#include "dlock/transport/uv/host_lookup.h"

#include <uv.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace dlock {
namespace {

TEST(HostLookupTest, TellsIpLiteralsFromNames) {
  EXPECT_TRUE(IsIpLiteral("127.0.0.1"));
  EXPECT_TRUE(IsIpLiteral("::1"));
  EXPECT_FALSE(IsIpLiteral("localhost"));
  EXPECT_FALSE(IsIpLiteral("127.0.0.1.example"));
}

TEST(HostLookupTest, ResolvesOnTheLoopNotInsideStart) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  std::unique_ptr<HostLookup> lookup;
  int calls = 0;
  std::string got;
  ASSERT_EQ(HostLookup::Start(
                &loop, "localhost",
                [&](int status, std::string ip) {
                  ++calls;
                  EXPECT_EQ(status, 0);
                  got = ip;
                  lookup.reset();  // allowed inside the callback
                },
                &lookup),
            0);
  EXPECT_EQ(calls, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(IsIpLiteral(got)) << got;
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(HostLookupTest, DestroyedLookupNeverCallsBack) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  std::unique_ptr<HostLookup> lookup;
  int calls = 0;
  ASSERT_EQ(HostLookup::Start(
                &loop, "localhost", [&](int, std::string) { ++calls; }, &lookup),
            0);
  lookup.reset();
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace dlock
