#include "dlock/testing/redis_server.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/testing/server_child.h"
#include "dlock/transport/uv/hiredis_reply.h"

namespace dlock {
namespace test_support {
namespace {

absl::StatusOr<std::string> MakeTempDir(const std::string& parent,
                                        absl::string_view prefix) {
  std::string templ = absl::StrCat(parent, "/", prefix, "XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return ErrnoStatus(absl::StrCat("mkdtemp ", templ));
  }
  return std::string(buf.data());
}

}  // namespace

RedisServer::RedisServer(RedisServerOptions options,
                         std::unique_ptr<RedisProcess> process)
    : options_(std::move(options)),
      process_(std::move(process)),
      port_(process_->port()) {}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(
    RedisServerOptions options) {
  // The directory is kept after the server stops (under $TEST_TMPDIR, which
  // Bazel cleans), so a failing test's log stays inspectable.
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base;
  if (tmp != nullptr && *tmp != '\0') {
    base = tmp;
  } else {
    auto made = MakeTempDir("/tmp", "dlock-test-");
    if (!made.ok()) return made.status();
    base = *made;
  }
  auto dir = MakeTempDir(base, "redis-");
  if (!dir.ok()) return dir.status();

  RedisProcessOptions process_options;
  process_options.extra_args = options.extra_args;
  process_options.config_file = options.config_file;
  process_options.appendonly = options.appendonly;
  process_options.password = options.password;
  process_options.unix_socket = options.unix_socket;
  process_options.dir = *dir;
  process_options.start_timeout = options.start_timeout;
  process_options.trusted_data_set_prefixes = options.trusted_data_set_prefixes;
  auto process = RedisProcess::Start(std::move(process_options));
  if (!process.ok()) return process.status();
  return std::unique_ptr<RedisServer>(
      new RedisServer(std::move(options), *std::move(process)));
}

RedisServer::~RedisServer() {
  DropConnection();
  // process_'s destructor stops the server and removes the unix socket.
}

std::string RedisServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

std::string RedisServer::unix_socket() const { return process_->unix_socket(); }

void RedisServer::DropConnection() {
  if (conn_ != nullptr) {
    redisFree(conn_);
    conn_ = nullptr;
  }
}

absl::Status RedisServer::Pause() { return process_->Pause(); }

absl::Status RedisServer::Resume() { return process_->Resume(); }

absl::Status RedisServer::Kill() {
  DropConnection();
  return process_->Kill();
}

absl::Status RedisServer::Stop() {
  DropConnection();
  return process_->Stop();
}

absl::Status RedisServer::Restart() {
  DropConnection();
  return process_->Restart();
}

absl::StatusOr<Reply> RedisServer::Command(std::vector<std::string> argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (!running()) return absl::UnavailableError("server not running");
  if (conn_ == nullptr) {
    timeval connect_timeout = {1, 0};
    conn_ = redisConnectWithTimeout(host_.c_str(), port_, connect_timeout);
    if (conn_ == nullptr || conn_->err) {
      std::string err = conn_ ? conn_->errstr : "out of memory";
      DropConnection();
      return absl::UnavailableError(absl::StrCat("connect ", address(), ": ", err));
    }
    timeval io_timeout = absl::ToTimeval(options_.command_timeout);
    redisSetTimeout(conn_, io_timeout);
    if (!options_.password.empty()) {
      absl::StatusOr<Reply> auth = Command({"AUTH", options_.password});
      if (!auth.ok()) return auth.status();
      if (auth->is_error()) {
        DropConnection();
        return absl::UnavailableError(absl::StrCat("AUTH: ", auth->str));
      }
    }
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(conn_, static_cast<int>(argv.size()), ptrs.data(),
                               lens.data());
  if (raw == nullptr) {
    std::string err = conn_->errstr;
    DropConnection();
    return absl::UnavailableError(absl::StrCat(address(), ": ", err));
  }
  redisReply* reply = static_cast<redisReply*>(raw);
  Reply out = ReplyFromHiredis(*reply);
  freeReplyObject(reply);
  return out;
}

std::string RedisServer::LogTail(size_t max_bytes) const {
  return process_->LogTail(max_bytes);
}

}  // namespace test_support
}  // namespace dlock
