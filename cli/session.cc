#include "dlock/cli/session.h"

#include <uv.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/transport/uv/uv_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

namespace dlock {
namespace cli {

absl::StatusOr<std::unique_ptr<Session>> Session::Open(
    const std::vector<RedisUrl>& urls, const TlsOptions& tls,
    absl::Duration command_timeout) {
  std::unique_ptr<Session> s(new Session());
  s->uv_loop_ = new uv_loop_t;
  if (int rc = uv_loop_init(s->uv_loop_); rc != 0) {
    delete s->uv_loop_;
    s->uv_loop_ = nullptr;
    return absl::InternalError(absl::StrCat("uv_loop_init: ", uv_strerror(rc)));
  }
  s->loop_ = std::make_unique<UvEventLoop>(s->uv_loop_);
  s->urls_ = urls;
  s->command_timeout_ = command_timeout;
  for (const RedisUrl& url : urls) {
    UvTransportOptions o = TransportOptionsForUrl(url, tls);
    o.connection.connect_timeout = command_timeout;
    if (!url.user.empty() && url.password.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          url.Display(), ": user \"", url.user,
          "\" needs a password (in the URL or the password environment variable)"));
    }
    absl::StatusOr<std::unique_ptr<UvTransport>> t = UvTransport::Create(s->uv_loop_, o);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat(url.Display(), ": ", t.status().message()));
    }
    s->clusters_.push_back((*t)->cluster_transport());
    s->transports_.push_back(*std::move(t));
  }
  return s;
}

Session::~Session() {
  if (uv_loop_ != nullptr) (void)DrainCommands(command_timeout_);
  CloseTransports();
  loop_.reset();
  if (uv_loop_ != nullptr) {
    uv_run(uv_loop_, UV_RUN_DEFAULT);  // deliver the close callbacks
    uv_loop_close(uv_loop_);
    delete uv_loop_;
  }
}

bool Session::DrainCommands(absl::Duration bound) {
  if (drain_deadline_ == absl::InfiniteFuture()) drain_deadline_ = loop_->Now() + bound;
  auto pending = [this] {
    for (const auto& t : transports_) {
      if (t->pending_commands() > 0) return true;
    }
    return false;
  };
  bool out_of_time = false;
  TimerId timer = 0;  // wakes the loop at the deadline (replies wake it before)
  bool drained = false;
  while (true) {
    if (!pending()) {
      // Nothing in flight: one more turn runs what the last replies posted
      // (zero-delay timers), which may send more.
      uv_run(uv_loop_, UV_RUN_NOWAIT);
      if (!pending()) {
        drained = true;
        break;
      }
    }
    if (out_of_time) break;
    if (timer == 0) {
      const absl::Duration left = drain_deadline_ - loop_->Now();
      if (left <= absl::ZeroDuration()) break;
      timer = loop_->RunAfter(left, [&out_of_time] { out_of_time = true; });
    }
    if (uv_run(uv_loop_, UV_RUN_ONCE) == 0) break;  // ran dry: nothing can answer
  }
  if (timer != 0 && !out_of_time) loop_->Cancel(timer);
  return drained;
}

void Session::CloseTransports() {
  clusters_.clear();
  transports_.clear();
}

std::vector<Transport*> Session::transports() const {
  std::vector<Transport*> out;
  for (const auto& t : transports_) out.push_back(t.get());
  return out;
}

bool Session::RunUntil(absl::FunctionRef<bool()> done) {
  while (!done()) {
    if (uv_run(uv_loop_, UV_RUN_ONCE) == 0 && !done()) return false;
  }
  return true;
}

absl::StatusOr<Reply> Session::Call(size_t i, std::vector<std::string> argv) {
  return CallOn(*transports_[i], std::move(argv));
}

absl::StatusOr<Reply> Session::CallOn(Transport& t, std::vector<std::string> argv) {
  return AwaitReply([&](ReplyCallback cb) {
    return t.Send(std::move(argv), command_timeout_, std::move(cb));
  });
}

absl::StatusOr<Reply> Session::RunScript(size_t i, const Script& script,
                                         std::vector<std::string> keys,
                                         std::vector<std::string> args) {
  return AwaitReply([&](ReplyCallback cb) {
    return script.Run(*transports_[i], std::move(keys), std::move(args), command_timeout_,
                      std::move(cb));
  });
}

absl::StatusOr<Reply> Session::AwaitReply(
    absl::FunctionRef<absl::Status(ReplyCallback)> send) {
  bool done = false;
  absl::StatusOr<Reply> result = absl::UnknownError("no reply");
  absl::Status sent = send([&done, &result](absl::StatusOr<Reply> r) {
    result = std::move(r);
    done = true;
  });
  if (!sent.ok()) return sent;
  if (!RunUntil([&done] { return done; })) {
    return absl::InternalError("event loop ran dry before the reply");
  }
  return result;
}

std::unique_ptr<Session> OpenForCommand(const CommonOptions& common, int* exit_code) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(common.urls, common.tls, common.timeout);
  if (!session.ok()) {
    std::fprintf(stderr, "dlock: %s\n", session.status().ToString().c_str());
    *exit_code = ExitCodeForStatus(session.status());
    return nullptr;
  }
  return *std::move(session);
}

int CheckResourceArgument(absl::string_view resource) {
  absl::Status valid = ValidateResource(resource);
  if (valid.ok()) return kExitOk;
  std::fprintf(stderr, "dlock: %s\n", std::string(valid.message()).c_str());
  return kExitUsage;
}

}  // namespace cli
}  // namespace dlock
