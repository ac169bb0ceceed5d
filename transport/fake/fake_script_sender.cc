#include "dlock/transport/fake/fake_script_sender.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/reply.h"

namespace dlock {

void FakeScriptSender::Send(absl::string_view body,
                            absl::Span<const absl::string_view> evalsha_argv,
                            absl::Duration timeout, ReplyCallback callback) {
  ScriptSend send;
  send.body = std::string(body);
  send.evalsha.reserve(evalsha_argv.size());
  for (absl::string_view a : evalsha_argv) send.evalsha.emplace_back(a);
  send.deadline = loop_->Now() + timeout;
  send.callback = std::move(callback);
  IssueScript(std::move(send));
}

void FakeScriptSender::IssueScript(ScriptSend send) {
  if (loaded_epoch_ != epoch_) {
    loaded_.clear();  // a new connection knows no script
    loaded_epoch_ = epoch_;
  }
  const std::string sha = send.evalsha[1];
  const bool load = !loaded_.contains(sha);
  if (load) Log({"SCRIPT", "LOAD", send.body});
  Log(send.evalsha);
  send.serial = ++sent_serial_;
  send.epoch = epoch_;
  std::vector<std::string> argv = send.evalsha;
  std::string body = load ? send.body : std::string();
  const absl::Duration timeout = send.deadline - loop_->Now();
  // Touches `this` only for a NOSCRIPT reply, which only the command queue
  // delivers (this transport is alive then); Close's kCancelled passes
  // straight through.
  const uint64_t id = commands_.Add(
      timeout, [this, send = std::move(send)](absl::StatusOr<Reply> reply) mutable {
        if (reply.ok() && reply->IsErrorWithPrefix("NOSCRIPT")) {
          OnNoScript(std::move(send));
          return;
        }
        std::move(send.callback)(std::move(reply));
      },
      // A NOSCRIPT read after the command timed out still tells that the
      // cache was flushed (as LinkSession::OnNoScript for the real link).
      [this, epoch = epoch_](const Reply& late) {
        if (late.IsErrorWithPrefix("NOSCRIPT") && epoch == epoch_) loaded_.clear();
      });
  // The load and its EVALSHA take one fate together: the script is known
  // loaded once they reach the server.
  if (commands_.Dispatch(id, std::move(argv), std::move(body)) && load) loaded_.insert(sha);
}

void FakeScriptSender::OnNoScript(ScriptSend send) {
  // The cache was flushed under this connection: nothing is known loaded.
  if (send.epoch == epoch_) loaded_.clear();
  if (!closed_ && !partitioned() && !send.resent && send.epoch == epoch_ &&
      send.serial == sent_serial_ && loop_->Now() < send.deadline) {
    // Nothing was sent after it on this connection: sending it again (load
    // + EVALSHA) keeps the order.
    send.resent = true;
    IssueScript(std::move(send));
    return;
  }
  std::move(send.callback)(absl::UnavailableError(
      absl::StrCat("FakeTransport: ", kScriptCacheFlushedMessage)));
}

}  // namespace dlock
