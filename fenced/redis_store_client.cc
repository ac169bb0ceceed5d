#include "dlock/fenced/redis_store_client.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/transport/uv/uv_transport.h"

namespace dlock {
namespace fenced {

RedisFencedStoreClient::RedisFencedStoreClient()
    : thread_(std::make_unique<UvLoopThread>()) {}

RedisFencedStoreClient::~RedisFencedStoreClient() {
  // Close and free the connection on its loop thread (pending calls get
  // kCancelled), then join the thread.
  absl::Status closed =
      PostAndWait<absl::Status>(thread_.get(), [this](Completion<absl::Status> done) {
        if (transport_ != nullptr) transport_->Close();
        blocking_.reset();
        store_.reset();
        transport_.reset();
        done(absl::OkStatus());
      });
  (void)closed;
  thread_.reset();
}

absl::StatusOr<std::unique_ptr<RedisFencedStoreClient>> RedisFencedStoreClient::Connect(
    absl::string_view url_text, RedisFencedStoreOptions options,
    absl::Duration connect_timeout) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(url_text);
  if (!url.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisFencedStoreClient: ", url.status().message()));
  }
  if (connect_timeout <= absl::ZeroDuration() || connect_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "RedisFencedStoreClient: connect_timeout must be finite and positive");
  }
  std::unique_ptr<RedisFencedStoreClient> client(new RedisFencedStoreClient());
  RedisFencedStoreClient* c = client.get();
  UvTransportOptions transport_options = TransportOptionsForUrl(*url);
  transport_options.connection.connect_timeout = connect_timeout;
  const std::string name = url->Display();
  absl::Status up = PostAndWait<absl::Status>(
      c->thread_.get(), [c, &transport_options, &options, &name](Completion<absl::Status> done) {
        auto transport = UvTransport::Create(c->thread_->uv_loop(), transport_options);
        if (!transport.ok()) {
          return done(absl::InvalidArgumentError(
              absl::StrCat("RedisFencedStoreClient: ", name, ": ", transport.status().message())));
        }
        c->transport_ = *std::move(transport);
        c->store_ = std::make_unique<RedisFencedStore>(c->transport_.get(), options);
        absl::Status valid = RedisFencedStore::ValidateOptions(c->transport_.get(), options);
        if (!valid.ok()) return done(valid);
        Completion<absl::Status> mine = done.Share();
        absl::Status sent =
            c->transport_->Connect([done = std::move(done), name](absl::Status s) mutable {
              if (s.ok()) return done(s);
              done(absl::Status(s.code(), absl::StrCat("RedisFencedStoreClient: ", name, ": ",
                                                       s.message())));
            });
        if (!sent.ok()) mine(sent);
      });
  if (!up.ok()) return up;
  c->blocking_ = std::make_unique<BlockingRedisFencedStore>(c->thread_.get(), c->store_.get());
  return client;
}

absl::StatusOr<RedisWriteResult> RedisFencedStoreClient::Write(absl::string_view resource,
                                                               int64_t fence,
                                                               RedisWrite write) {
  return blocking_->Write(resource, fence, std::move(write));
}

absl::StatusOr<int64_t> RedisFencedStoreClient::HighestFence(absl::string_view resource) {
  return blocking_->HighestFence(resource);
}

std::string RedisFencedStoreClient::DataKey(absl::string_view resource,
                                            absl::string_view name) const {
  return store_->DataKey(resource, name);
}

std::string RedisFencedStoreClient::FenceKey(absl::string_view resource) const {
  return store_->FenceKey(resource);
}

}  // namespace fenced
}  // namespace dlock
