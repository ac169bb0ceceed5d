#include "dlock/lock/lease_command.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "dlock/lock/error_text.h"
#include "dlock/lock/reply_status.h"

namespace dlock {
namespace {

// Fences stay at most 2^53 - 1 (script_prelude.h: exhausted past it).
constexpr int64_t kMaxFence = 9007199254740991;
constexpr int64_t kMaxMarkerMs = 9000000000000;

// What a SET NX PX GET that did not set answers, as AcquireScript's reply:
// nil (held) for an old value, the foreign refusal for WRONGTYPE (the
// command cannot tell which type), else the reply as it is (SET's own
// error, or a reply of the wrong shape for the parser to name).
Reply RefusedSetAsScriptReply(const Reply& set) {
  if (set.is_string()) return Reply::Nil();
  if (set.is_error() && absl::StartsWith(set.str, "WRONGTYPE")) {
    std::vector<Reply> foreign;
    foreign.push_back(Reply::String("foreign"));
    foreign.push_back(Reply::String("not a string"));
    foreign.push_back(Reply::Integer(0));
    return Reply::Array(std::move(foreign));
  }
  return set;
}

}  // namespace

int64_t ValidTxFence(const Reply& incr, const Reply& marker, const Reply* time,
                     int64_t window_ms) {
  if (!incr.is_integer() || incr.integer < 1 || incr.integer > kMaxFence) return 0;
  const int64_t fence = incr.integer;
  int64_t began = 0;
  if (!marker.is_string() || !absl::SimpleAtoi(marker.str, &began) || began < 0 ||
      began > kMaxMarkerMs) {
    return 0;  // missing or foreign: the script creates or refuses it
  }
  if (began == 0) return fence;  // trusted: the window always passes too
  if (fence <= began * 1000) return 0;  // a mark recreated by INCRs
  if (window_ms <= 0) return fence;
  int64_t sec = 0, usec = 0;
  if (time == nullptr || !time->is_array() || time->elements.size() != 2 ||
      !absl::SimpleAtoi(time->elements[0].str, &sec) ||
      !absl::SimpleAtoi(time->elements[1].str, &usec)) {
    return 0;
  }
  // The fast path on the mark (DLOCK_RESTART_RULE_AFTER_FENCE), else the
  // full rule on the marker just read; a young data set goes to the
  // script, which refuses it and deletes the lock key.
  const bool fast = sec * 1000000 + usec - (fence - 1) >= window_ms * 1000;
  const bool old = sec * 1000 + usec / 1000 - began >= window_ms;
  return fast || old ? fence : 0;
}

namespace {

// One FencedAcquireTx in flight: owns copies of its keys and args (the
// rare path sends them again), kept alive by the transport's callback.
// The copies share one buffer inside the object, so the usual acquire
// costs one allocation here (the object), not one per key and arg.
struct FencedAcquireTx {
  Transport* transport = nullptr;
  const Script* after_tx = nullptr;
  absl::Duration timeout;
  int64_t window_ms = 0;
  int64_t tx_fence = 0;    // INCR's reply (0: not an integer)
  AcquireReplyHandler on_reply;
  // Keys (lock, marker, mark), then args (token, ttl, window), back to
  // back; part i ends at ends[i].
  absl::InlinedVector<char, 160> bytes;
  size_t ends[6] = {};
  std::string fence_text;  // the fourth arg: the transaction's fence (rare path)

  void Keep(absl::Span<const absl::string_view> keys, absl::Span<const absl::string_view> args) {
    size_t n = 0;
    for (absl::string_view k : keys) n += k.size();
    for (absl::string_view a : args) n += a.size();
    bytes.reserve(n);
    size_t i = 0;
    for (absl::Span<const absl::string_view> part : {keys, args}) {
      for (absl::string_view v : part) {
        bytes.insert(bytes.end(), v.begin(), v.end());
        ends[i++] = bytes.size();
      }
    }
  }
  absl::string_view Part(size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return absl::string_view(bytes.data() + begin, ends[i] - begin);
  }

  void Finish(absl::StatusOr<Reply> reply) {
    const absl::string_view views[] = {Part(0), Part(1), Part(2)};
    std::move(on_reply)(std::move(reply), views);
  }

  // EXEC's reply read as AcquireScript's, or nullopt: the rare path.
  std::optional<Reply> Read(const Reply& exec) {
    const size_t n = window_ms > 0 ? 4 : 3;
    if (!exec.is_array() || exec.elements.size() != n) return exec;  // EXECABORT, ...
    const Reply& set = exec.elements[0];
    if (!set.is_nil()) return RefusedSetAsScriptReply(set);
    const Reply& incr = exec.elements[1];
    if (incr.is_integer() && incr.integer >= 1 && incr.integer <= kMaxFence) {
      tx_fence = incr.integer;
    }
    const int64_t fence =
        ValidTxFence(incr, exec.elements[2], window_ms > 0 ? &exec.elements[3] : nullptr,
                     window_ms);
    if (fence == 0) return std::nullopt;
    return Reply::Integer(fence);
  }

  static void OnExec(std::shared_ptr<FencedAcquireTx> tx, absl::StatusOr<Reply> reply) {
    if (!reply.ok()) {
      tx->Finish(std::move(reply));
      return;
    }
    std::optional<Reply> read = tx->Read(*reply);
    if (read.has_value()) {
      tx->Finish(*std::move(read));
      return;
    }
    // The rare path: only now is the transaction's fence spelled out.
    if (tx->tx_fence > 0) tx->fence_text = absl::StrCat(tx->tx_fence);
    const absl::string_view keys[] = {tx->Part(0), tx->Part(1), tx->Part(2)};
    const absl::string_view args[] = {tx->Part(3), tx->Part(4), tx->Part(5), tx->fence_text};
    FencedAcquireTx* raw = tx.get();
    absl::Status s = raw->after_tx->Invoke(
        *raw->transport, keys, args, raw->timeout,
        [tx](absl::StatusOr<Reply> r, absl::Span<const absl::string_view>) {
          tx->Finish(std::move(r));
        });
    // Refused at once (e.g. closed meanwhile): we are in the transport's
    // callback already, so answering now is not inside the caller's call.
    if (!s.ok()) raw->Finish(s);
  }
};

}  // namespace

absl::Status SendFencedAcquireTx(Transport& transport, const Script& script,
                                 const Script& after_tx,
                                 absl::Span<const absl::string_view> keys,
                                 absl::Span<const absl::string_view> args,
                                 absl::Duration timeout, AcquireReplyHandler on_reply) {
  if (keys.size() != 3 || args.size() != 3) {
    return absl::InvalidArgumentError("the fenced acquire takes 3 keys and 3 args");
  }
  int64_t window_ms = 0;
  if (!absl::SimpleAtoi(args[2], &window_ms)) {
    return absl::InvalidArgumentError("the fenced acquire's window is not a number");
  }
  const absl::string_view set[] = {"SET", keys[0], args[0], "NX", "PX", args[1], "GET"};
  const absl::string_view incr[] = {"INCR", keys[2]};
  const absl::string_view get[] = {"GET", keys[1]};
  const absl::string_view time[] = {"TIME"};
  const absl::Span<const absl::string_view> group[] = {set, incr, get, time};
  auto tx = std::make_shared<FencedAcquireTx>();
  tx->transport = &transport;
  tx->after_tx = &after_tx;
  tx->timeout = timeout;
  tx->window_ms = window_ms;
  tx->Keep(keys, args);
  tx->on_reply = std::move(on_reply);
  absl::Status s = transport.SendTransaction(
      absl::MakeConstSpan(group, window_ms > 0 ? 4 : 3), timeout,
      [tx](absl::StatusOr<Reply> reply) { FencedAcquireTx::OnExec(tx, std::move(reply)); });
  if (!absl::IsUnimplemented(s)) return s;
  // No transactions on this transport: the whole acquire as one script.
  return script.Invoke(transport, keys, args, timeout, std::move(tx->on_reply));
}

std::optional<absl::Status> AcquireNonGrant(const absl::StatusOr<Reply>& reply,
                                            absl::Span<const absl::string_view> keys,
                                            AcquireKeySlots slots, absl::string_view held) {
  if (!reply.ok()) return reply.status();
  if (reply->is_array()) {
    // A slot the script was not given (the unfenced acquire names no mark,
    // nor the marker with the window off) reads as an empty name.
    auto key = [keys](size_t slot) {
      return slot < keys.size() ? keys[slot] : absl::string_view();
    };
    std::optional<absl::Status> refusal = AcquireRefusalStatus(
        key(slots.lock), key(slots.fence), key(slots.data_set), *reply);
    if (refusal.has_value()) return refusal;
  }
  if (reply->is_nil()) return absl::AbortedError(held);
  return std::nullopt;
}

absl::StatusOr<int64_t> FenceReply::operator()(
    absl::StatusOr<Reply> reply, absl::Span<const absl::string_view> keys) const {
  if (set_get && reply.ok()) {
    // SET NX GET answers the old value: nil when it set the key.
    if (reply->is_nil()) return 0;
    if (reply->is_string()) return absl::AbortedError(held);
    if (reply->is_error() && absl::StartsWith(reply->str, "WRONGTYPE")) {
      // Another type under the lock key: the scripts' foreign refusal
      // (the plain command cannot tell which type).
      std::vector<Reply> foreign;
      foreign.push_back(Reply::String("foreign"));
      foreign.push_back(Reply::String("not a string"));
      foreign.push_back(Reply::Integer(0));
      std::optional<absl::Status> refusal =
          AcquireRefusalStatus(keys.empty() ? absl::string_view() : keys[0], absl::string_view(),
                               absl::string_view(), Reply::Array(std::move(foreign)));
      if (refusal.has_value()) return *std::move(refusal);
    }
    return UnexpectedReplyStatus("acquire", *reply);
  }
  std::optional<absl::Status> not_granted = AcquireNonGrant(reply, keys, slots, held);
  if (not_granted.has_value()) return *std::move(not_granted);
  if (reply->is_integer() && reply->integer >= min_fence) return reply->integer;
  return UnexpectedReplyStatus("acquire", *reply);
}

absl::Status OwnedReply::operator()(absl::StatusOr<Reply> reply,
                                    absl::Span<const absl::string_view>) const {
  if (!reply.ok()) return reply.status();
  if (reply->is_integer() && reply->integer == 1) return absl::OkStatus();
  if (reply->is_integer() && reply->integer == 0) {
    if (!lost.empty()) return absl::FailedPreconditionError(lost);
    return ErrorStatus(absl::StatusCode::kFailedPrecondition,
                       "%: the lease no longer owns the key", {what});
  }
  return UnexpectedReplyStatus(what, *reply);
}

absl::StatusOr<ReleaseNotice> ReleaseNoticeReply::operator()(
    absl::StatusOr<Reply> reply, absl::Span<const absl::string_view>) const {
  if (reply.ok() && reply->is_string()) {
    // Deleted; the PUBLISH was refused (see scripts.h).
    ReleaseNotice notice;
    notice.published = false;
    notice.publish_error = std::move(reply->str);
    return notice;
  }
  absl::Status status = OwnedReply{"release"}(std::move(reply), {});
  if (!status.ok()) return status;
  return ReleaseNotice();
}

absl::StatusOr<int64_t> AcquireReplyFence(const KeyScheme& keys, absl::string_view resource,
                                          const absl::StatusOr<Reply>& reply,
                                          int64_t min_fence, absl::string_view held) {
  const FenceReply parse{min_fence, held, AcquireKeySlots{}};
  // The keys are named only in a refusal (an array).
  if (!reply.ok() || !reply->is_array()) return parse(reply, {});
  const std::string lock = keys.LockKey(resource);
  const std::string data_set = keys.DataSetKey(resource);
  const std::string fence_mark = keys.FenceHwmKey(resource);
  const absl::string_view named[] = {lock, data_set, fence_mark};
  return parse(reply, named);
}

absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(absl::StatusOr<Reply> reply) {
  return ReleaseNoticeReply{}(std::move(reply), {});
}

absl::Status OwnedReplyStatus(absl::string_view what, const absl::StatusOr<Reply>& reply) {
  return OwnedReply{what}(reply, {});
}

absl::Status SendLeaseScript(Transport& transport, const Script& script,
                             absl::Span<const absl::string_view> keys,
                             absl::Span<const absl::string_view> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteRule wrote, size_t handler_size,
                             absl::FunctionRef<script_internal::ScriptCall*(void*)> construct) {
  return SendWithReplicaAck(transport, ack, wrote, [&](Transport& t) {
    return script_internal::ScriptCall::Start(script, t, keys, args, timeout, handler_size,
                                              construct);
  });
}

}  // namespace dlock
