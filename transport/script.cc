#include "dlock/transport/script.h"

#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dlock {

Script::Script(std::string source, std::string sha1)
    : source_(std::move(source)), sha1_(std::move(sha1)) {}

Script::Script(std::string source, std::string sha1, LateRun late_run)
    : source_(std::move(source)), sha1_(std::move(sha1)), late_run_(late_run) {}

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

// Up to 16 views on the stack, more on the heap (tools only).
class ViewArray {
 public:
  explicit ViewArray(const std::vector<std::string>& v) {
    if (v.size() > kInline) {
      heap_.reset(new absl::string_view[v.size()]);
      data_ = heap_.get();
    }
    for (size_t i = 0; i < v.size(); ++i) data_[i] = v[i];
    size_ = v.size();
  }
  absl::Span<const absl::string_view> span() const { return {data_, size_}; }

 private:
  static constexpr size_t kInline = 16;
  absl::string_view inline_[kInline];
  std::unique_ptr<absl::string_view[]> heap_;
  absl::string_view* data_ = inline_;
  size_t size_ = 0;
};

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
  ViewArray k(keys), a(args);
  return Invoke(transport, k.span(), a.span(), timeout, std::move(callback));
}

namespace script_internal {

// Owns a call from the transport's callback. Fits a callback's inline
// storage (one pointer).
struct ScriptCall::Owner {
  explicit Owner(ScriptCall* c) : call(c) {}
  Owner(Owner&& o) noexcept : call(std::exchange(o.call, nullptr)) {}
  Owner& operator=(Owner&&) = delete;
  ~Owner() {
    if (call == nullptr) return;
    if (call->in_resend_) {
      call->dropped_ = true;  // OnReply reports the re-send's rejection
    } else {
      Delete(call);
    }
  }
  ScriptCall* call;
};

void ScriptCall::Delete(ScriptCall* call) {
  call->~ScriptCall();
  ::operator delete(static_cast<void*>(call));
}

absl::Status ScriptCall::Start(const Script& script, Transport& transport,
                               absl::Span<const absl::string_view> keys,
                               absl::Span<const absl::string_view> args,
                               absl::Duration timeout, size_t handler_size,
                               absl::FunctionRef<ScriptCall*(void*)> construct) {
  char numkeys[absl::numbers_internal::kFastToBufferSize];
  const char* numkeys_end = absl::numbers_internal::FastIntToBuffer(
      static_cast<uint64_t>(keys.size()), numkeys);
  const size_t numkeys_len = static_cast<size_t>(numkeys_end - numkeys);
  const size_t argc = 3 + keys.size() + args.size();
  size_t bytes = numkeys_len;
  for (absl::string_view k : keys) bytes += k.size();
  for (absl::string_view a : args) bytes += a.size();
  // [handler object][argc views][bytes]
  constexpr size_t kAlign = alignof(absl::string_view);
  const size_t views_at = (handler_size + kAlign - 1) / kAlign * kAlign;
  const size_t bytes_at = views_at + argc * sizeof(absl::string_view);
  char* mem = static_cast<char*>(::operator new(bytes_at + bytes));
  ScriptCall* call = construct(mem);
  call->script_ = &script;
  call->transport_ = &transport;
  call->timeout_ = timeout;
  call->argc_ = argc;
  call->argv_ = reinterpret_cast<absl::string_view*>(mem + views_at);
  call->num_keys_ = keys.size();
  char* out = mem + bytes_at;
  auto copy = [&out](absl::string_view v) {
    if (!v.empty()) std::memcpy(out, v.data(), v.size());
    absl::string_view copied(out, v.size());
    out += v.size();
    return copied;
  };
  absl::string_view* argv = call->argv_;
  new (&argv[0]) absl::string_view("EVALSHA");
  new (&argv[1]) absl::string_view(script.sha1());
  new (&argv[2]) absl::string_view(copy(absl::string_view(numkeys, numkeys_len)));
  size_t i = 3;
  for (absl::string_view k : keys) new (&argv[i++]) absl::string_view(copy(k));
  for (absl::string_view a : args) new (&argv[i++]) absl::string_view(copy(a));
  // The views and the script's body stay valid until the callback has run
  // or been destroyed (the Owner deletes the call only then), as
  // SendScript requires. A rejection destroys the callback, and with it the
  // call and its handler (never run), as the transport contract says.
  return call->Send();
}

absl::Status ScriptCall::Send() {
  return transport_->SendScript(
      script_->source(), absl::MakeConstSpan(argv_, argc_), timeout_,
      [owner = Owner(this)](absl::StatusOr<Reply> reply) mutable {
        OnReply(std::exchange(owner.call, nullptr), std::move(reply));
      });
}

void ScriptCall::OnReply(ScriptCall* call, absl::StatusOr<Reply> reply) {
  if (!reply.ok() && !call->resent_ && call->script_->safe_to_run_late() &&
      reply.status().code() == absl::StatusCode::kUnavailable &&
      absl::EndsWith(reply.status().message(), kScriptCacheFlushedMessage)) {
    // Did not run, and running it after later commands is harmless: send
    // it again (the connection now loads it first). We are inside the
    // transport's callback, so the new callback cannot run inside Send.
    call->resent_ = true;
    call->in_resend_ = true;
    absl::Status sent = call->Send();
    call->in_resend_ = false;
    if (!call->dropped_) return;  // accepted: its callback owns the call
    reply = sent.ok() ? reply.status() : sent;
  }
  call->Deliver(std::move(reply));
  Delete(call);
}

}  // namespace script_internal
}  // namespace dlock
