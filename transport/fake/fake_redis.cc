#include "dlock/transport/fake/fake_redis.h"

#include <utility>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_hashes.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/fake/fake_redis_pubsub.h"
#include "dlock/transport/fake/fake_redis_scripting.h"
#include "dlock/transport/fake/fake_redis_server.h"
#include "dlock/transport/fake/fake_redis_strings.h"
#include "dlock/transport/fake/fake_redis_zsets.h"

// The facade: builds the components and forwards to them. The commands are
// the families' (fake_redis_strings.h, fake_redis_hashes.h,
// fake_redis_zsets.h, fake_redis_pubsub.h, fake_redis_scripting.h,
// fake_redis_server.h), their dispatch the CommandTable's
// (fake_redis_commands.h), the data the Keyspace's (fake_redis_keyspace.h).

namespace dlock {

using fake_redis_internal::Value;

FakeRedis::FakeRedis(EventLoop* loop) : FakeRedis(loop, Options()) {}

FakeRedis::FakeRedis(EventLoop* loop, Options options)
    : loop_(loop),
      clock_(std::make_unique<fake_redis_internal::ServerClock>(loop, options.start_time)),
      log_(std::make_unique<fake_redis_internal::CommandLog>(clock_.get(),
                                                             options.max_log_entries)),
      keyspace_(std::make_unique<fake_redis_internal::Keyspace>(clock_.get())),
      commands_(std::make_unique<fake_redis_internal::CommandTable>(log_.get())),
      pubsub_(std::make_unique<fake_redis_internal::PubSubHub>()),
      strings_(std::make_unique<fake_redis_internal::StringCommands>(keyspace_.get())),
      hashes_(std::make_unique<fake_redis_internal::HashCommands>(keyspace_.get())),
      zsets_(std::make_unique<fake_redis_internal::ZSetCommands>(keyspace_.get())),
      pubsub_commands_(std::make_unique<fake_redis_internal::PubSubCommands>(pubsub_.get())),
      scripting_(std::make_unique<fake_redis_internal::ScriptingCommands>(
          commands_.get(), options.max_script_instructions)),
      server_(std::make_unique<fake_redis_internal::ServerCommands>(clock_.get(),
                                                                     keyspace_.get())) {
  strings_->Register(commands_.get());
  hashes_->Register(commands_.get());
  zsets_->Register(commands_.get());
  pubsub_commands_->Register(commands_.get());
  scripting_->Register(commands_.get());
  server_->Register(commands_.get());
}

FakeRedis::~FakeRedis() {
  // Sessions should be gone; detach any left so they do not dangle.
  pubsub_->DetachSessions();
}

Reply FakeRedis::Execute(std::vector<std::string> argv) {
  fake_redis_internal::CallContext ctx;
  return std::move(commands_->Dispatch(ctx, std::move(argv)).front());
}

std::unique_ptr<FakeRedis::Session> FakeRedis::NewSession() {
  return pubsub_->NewSession(commands_.get());
}

// ---------------------------------------------------------------------------
// Faults.

void FakeRedis::Restart() {
  keyspace_->Clear();
  scripting_->Restart();
  server_->NewRunId();
  ++restart_count_;
  pubsub_->Restart();
}

void FakeRedis::JumpClock(absl::Duration d) { clock_->Jump(d); }

bool FakeRedis::Evict(absl::string_view key) { return keyspace_->Delete(key); }

void FakeRedis::DenyChannels(bool deny) { commands_->set_channels_denied(deny); }

bool FakeRedis::channels_denied() const { return commands_->channels_denied(); }

void FakeRedis::SetAcknowledgingReplicas(int n) { server_->set_acknowledging_replicas(n); }

// ---------------------------------------------------------------------------
// Inspection.

bool FakeRedis::Exists(absl::string_view key) { return keyspace_->Find(key) != nullptr; }

std::optional<std::string> FakeRedis::GetString(absl::string_view key) {
  Value* v = keyspace_->Find(key);
  if (v == nullptr || v->kind != Value::Kind::kString) return std::nullopt;
  return v->str;
}

std::optional<std::vector<std::pair<std::string, std::string>>> FakeRedis::GetHash(
    absl::string_view key) {
  Value* v = keyspace_->Find(key);
  if (v == nullptr || v->kind != Value::Kind::kHash) return std::nullopt;
  return v->hash;
}

int64_t FakeRedis::PTtl(absl::string_view key) { return keyspace_->PTtl(key); }

std::vector<std::string> FakeRedis::Keys() { return keyspace_->Keys(); }

size_t FakeRedis::DbSize() { return keyspace_->Size(); }

std::vector<std::string> FakeRedis::CachedScripts() const {
  return scripting_->CachedScripts();
}

const std::string& FakeRedis::run_id() const { return server_->run_id(); }

int64_t FakeRedis::NowMs() const { return clock_->NowMs(); }

size_t FakeRedis::SubscriberCount(const std::string& channel) const {
  return pubsub_->SubscriberCount(channel);
}

const std::vector<FakeRedis::LogEntry>& FakeRedis::log() const { return log_->entries(); }

void FakeRedis::ClearLog() { log_->Clear(); }

int64_t FakeRedis::CountInLog(absl::string_view command) const { return log_->Count(command); }

}  // namespace dlock
