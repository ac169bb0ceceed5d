// The hand-off queue's scripts (lock/handoff_scripts.h) on a real
// redis-server, step by step: the replies and the queue each step leaves
// (Lua details the fake could get wrong: TIME, a missing ZSCORE read as
// false, negative expiries for granted entries, the reply 2 of a release
// that kept the releaser's entry). The clients' side: //lock:handoff_test
// on the fake, and bench/handoff_contend.sh on a real server.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/testing/redis_server.h"

namespace dlock {
namespace {

class HandOffScriptsRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<test_support::RedisServer>> s =
        test_support::RedisServer::Start({});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  Reply Run(std::vector<std::string> argv) {
    absl::StatusOr<Reply> r = server_->Command(std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply();
  }
  Reply Queue(const std::string& id, const std::string& mode) {
    return Run({"EVAL", HandOffQueueScript().source(), "3", lock_, q_, qx_, id, "3000", mode,
                channel_});
  }
  Reply Release(const std::string& token, const std::string& self, const std::string& rejoin) {
    return Run({"EVAL", HandOffReleaseScript().source(), "3", lock_, q_, qx_, token, channel_,
                self, rejoin, "3000"});
  }
  std::vector<std::string> Ids() {
    std::vector<std::string> ids;
    Reply r = Run({"ZRANGE", q_, "0", "-1"});
    for (const Reply& e : r.elements) ids.push_back(e.str);
    return ids;
  }
  bool Granted(const std::string& id) {
    Reply r = Run({"ZSCORE", qx_, id});
    return r.is_string() && !r.str.empty() && r.str[0] == '-';
  }

  std::unique_ptr<test_support::RedisServer> server_;
  const std::string lock_ = "dlock:{r}", channel_ = "dlock:{r}:released";
  const std::string q_ = HandOffQueueKey(channel_), qx_ = HandOffQueueExpiryKey(channel_);
};

TEST_F(HandOffScriptsRealTest, ARoundOfJoinsReleasesAndALeave) {
  Run({"SET", lock_, "tokH", "PX", "30000"});
  EXPECT_EQ(Queue("a", "join"), Reply::Integer(1));  // held: queued
  EXPECT_EQ(Queue("b", "join"), Reply::Integer(1));
  EXPECT_EQ(Ids(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Release("tokX", "h", "0"), Reply::Integer(0));  // not ours
  EXPECT_EQ(Release("tokH", "h", "0"), Reply::Integer(1));  // handed to a
  EXPECT_EQ(Run({"EXISTS", lock_}), Reply::Integer(0));
  EXPECT_TRUE(Granted("a"));
  EXPECT_FALSE(Granted("b"));
  // Free, but a was handed the lock: c queues behind it, no new grant.
  EXPECT_EQ(Queue("c", "join"), Reply::Integer(1));
  EXPECT_FALSE(Granted("b"));
  EXPECT_EQ(Queue("a", "join"), Reply::Integer(0));  // a is the head: attempt
  Run({"SET", lock_, "tokA", "PX", "30000"});        // a's acquire
  // a releases, keeping its entry at the tail: reply 2; b is handed it.
  EXPECT_EQ(Release("tokA", "a", "1"), Reply::Integer(2));
  EXPECT_EQ(Ids(), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_TRUE(Granted("b"));
  EXPECT_FALSE(Granted("a"));
  // b gives up: its leave passes the hand-off on to c.
  EXPECT_EQ(Queue("b", "leave"), Reply::Integer(0));
  EXPECT_EQ(Ids(), (std::vector<std::string>{"c", "a"}));
  EXPECT_TRUE(Granted("c"));
  // Both queue keys carry a TTL (nothing is left behind for ever).
  for (const std::string& k : {q_, qx_}) {
    Reply ttl = Run({"PTTL", k});
    EXPECT_TRUE(ttl.is_integer() && ttl.integer > 0) << k;
  }
}

TEST_F(HandOffScriptsRealTest, AReleaseWithNobodyQueuedPublishesTheToken) {
  Run({"SET", lock_, "tokH", "PX", "30000"});
  EXPECT_EQ(Release("tokH", "h", "1"), Reply::Integer(1));  // nobody to hand to, no rejoin
  EXPECT_EQ(Run({"EXISTS", lock_}), Reply::Integer(0));
  EXPECT_EQ(Run({"EXISTS", q_}), Reply::Integer(0));
  // The counting release: the plain release's reply 1 + receivers (none).
  Run({"SET", lock_, "tokH", "PX", "30000"});
  EXPECT_EQ(Run({"EVAL", CountingReleaseScript().source(), "1", lock_, "tokH", channel_}),
            Reply::Integer(1));
  EXPECT_EQ(Run({"EVAL", CountingReleaseScript().source(), "1", lock_, "tokH", channel_}),
            Reply::Integer(0));
}

}  // namespace
}  // namespace dlock
