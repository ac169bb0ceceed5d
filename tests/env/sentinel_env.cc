#include "dlock/tests/env/sentinel_env.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/transport/uv/sentinel_transport.h"

namespace dlock {
namespace test_support {

SentinelDeployment* SharedSentinelDeployment() {
  static SentinelDeployment* deployment = [] {
    auto d = SentinelDeployment::Start();
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      return static_cast<SentinelDeployment*>(nullptr);
    }
    return d->release();  // lives for the process; its processes die with it
  }();
  return deployment;
}

SentinelRedis::SentinelRedis() : deployment_(SharedSentinelDeployment()) {
  if (deployment_ == nullptr) return;
  absl::StatusOr<int> master = deployment_->MasterIndex();
  EXPECT_TRUE(master.ok()) << master.status();
  if (!master.ok()) return;
  master_ = &deployment_->data(*master);
  // Only the trusted data-set marker stays from earlier tests (what a
  // fresh RedisServer holds); replicated to the replicas like any write.
  KeyScheme keys;
  EXPECT_TRUE(master_->Command({"FLUSHALL"}).ok());
  EXPECT_TRUE(master_->Command({"SET", keys.DataSetKey(), "0"}).ok());
}

absl::StatusOr<std::unique_ptr<Transport>> SentinelRedis::NewTransport(uv_loop_t* loop) {
  SentinelTransportOptions o;
  if (deployment_ != nullptr) {
    o.master_name = deployment_->master_name();
    for (int i = 0; i < deployment_->sentinel_count(); ++i) {
      o.sentinels.push_back({"127.0.0.1", deployment_->sentinel(i).port()});
    }
  }
  absl::StatusOr<std::unique_ptr<SentinelTransport>> t =
      SentinelTransport::Create(loop, std::move(o));
  if (!t.ok()) return t.status();
  return std::unique_ptr<Transport>(*std::move(t));
}

void SentinelRedis::CheckConnected(Transport& client) {
  if (master_ == nullptr) return;
  EXPECT_EQ(static_cast<SentinelTransport&>(client).master_address(),
            absl::StrCat("127.0.0.1:", master_->port()));
}

absl::StatusOr<Reply> SentinelRedis::Command(std::vector<std::string> argv) {
  if (master_ == nullptr) return absl::FailedPreconditionError("no master");
  return master_->Command(std::move(argv));
}

}  // namespace test_support
}  // namespace dlock
