#include "dlock/transport/script.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {

Script::Script(std::string source, std::string sha1)
    : source_(std::move(source)), sha1_(std::move(sha1)) {}

namespace {

std::vector<std::string> BuildArgv(absl::string_view cmd, const std::string& body,
                                   const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.emplace_back(cmd);
  argv.push_back(body);
  argv.push_back(absl::StrCat(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

std::vector<std::string> Script::EvalArgv(const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args) const {
  return BuildArgv("EVAL", source_, keys, args);
}

std::vector<std::string> Script::EvalShaArgv(const std::vector<std::string>& keys,
                                             const std::vector<std::string>& args) const {
  return BuildArgv("EVALSHA", sha1_, keys, args);
}

absl::Status Script::Run(Transport& transport, std::vector<std::string> keys,
                         std::vector<std::string> args, absl::Duration timeout,
                         ReplyCallback callback) const {
  std::vector<std::string> sha_argv = EvalShaArgv(keys, args);
  // The transport and this script outlive the command (documented contract
  // of both), so the fallback may refer to them.
  Transport* t = &transport;
  const Script* self = this;
  return transport.Send(
      std::move(sha_argv), timeout,
      [t, self, timeout, keys = std::move(keys), args = std::move(args),
       callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
        if (!reply.ok() || !reply->IsErrorWithPrefix("NOSCRIPT")) {
          std::move(callback)(std::move(reply));
          return;
        }
        // Not cached on this server: the script did not run. Send the body.
        // We are inside a transport callback, so the new callback cannot run
        // inside this Send; exactly-once is kept by the transport.
        auto shared_cb = std::make_shared<ReplyCallback>(std::move(callback));
        absl::Status s = t->Send(self->EvalArgv(keys, args), timeout,
                                 [shared_cb](absl::StatusOr<Reply> r) {
                                   std::move (*shared_cb)(std::move(r));
                                 });
        if (!s.ok()) std::move(*shared_cb)(std::move(s));
      });
}

}  // namespace dlock
