#include "dlock/lock/write_acquire_tx.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/lease_command.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace {

enum Slot { kSet, kExists, kIncr, kMarker, kTime };

// One transaction in flight: copies of the keys and args (the rare path
// sends them again), kept alive by the transport's callback.
struct WriteTx {
  Transport* transport = nullptr;
  absl::Duration timeout;
  int64_t window_ms = 0;
  std::string keys[5];  // lock, readers, intent, marker, mark
  std::string args[5];  // token, ttl, window, intent, the transaction's fence
  AcquireReplyHandler on_reply;

  absl::Span<const absl::string_view> KeyViews(absl::string_view (&v)[5]) const {
    for (size_t i = 0; i < 5; ++i) v[i] = keys[i];
    return v;
  }

  void Finish(absl::StatusOr<Reply> reply) {
    absl::string_view v[5];
    std::move(on_reply)(std::move(reply), KeyViews(v));
  }

  static void OnExec(std::shared_ptr<WriteTx> tx, absl::StatusOr<Reply> reply) {
    if (!reply.ok()) return tx->Finish(std::move(reply));
    const size_t n = tx->window_ms > 0 ? 5 : 4;
    // Refused while queuing (EXECABORT, an ACL refusal...): as it is.
    if (!reply->is_array() || reply->elements.size() != n) return tx->Finish(std::move(reply));
    const Reply& exists = reply->elements[kExists];
    if (reply->elements[kSet].is_nil() && exists.is_integer() && exists.integer == 0) {
      const Reply* time = tx->window_ms > 0 ? &reply->elements[kTime] : nullptr;
      if (const int64_t fence = ValidTxFence(reply->elements[kIncr], reply->elements[kMarker],
                                             time, tx->window_ms);
          fence > 0) {
        return tx->Finish(Reply::Integer(fence));
      }
    }
    const Reply& incr = reply->elements[kIncr];
    tx->args[4] = incr.is_integer() ? absl::StrCat(incr.integer) : "0";
    absl::string_view k[5];
    const absl::string_view a[] = {tx->args[0], tx->args[1], tx->args[2], tx->args[3],
                                   tx->args[4]};
    WriteTx* raw = tx.get();
    absl::Status s = WriteAfterTxScript().Invoke(
        *raw->transport, raw->KeyViews(k), a, raw->timeout,
        [tx](absl::StatusOr<Reply> r, absl::Span<const absl::string_view>) {
          tx->Finish(std::move(r));
        });
    // Refused at once (closed meanwhile): we are inside the transport's
    // callback already, so answering now is not inside the caller's call.
    if (!s.ok()) raw->Finish(s);
  }
};

}  // namespace

absl::Status SendWriteAcquireTx(Transport& transport, absl::Span<const absl::string_view> keys,
                                absl::Span<const absl::string_view> args,
                                absl::Duration timeout, AcquireReplyHandler on_reply) {
  if (keys.size() != 5 || args.size() != 4) {
    return absl::InvalidArgumentError("the writer's acquire takes 5 keys and 4 args");
  }
  int64_t window_ms = 0;
  if (!absl::SimpleAtoi(args[2], &window_ms)) {
    return absl::InvalidArgumentError("the writer's window is not a number");
  }
  const absl::string_view set[] = {"SET", keys[0], args[0], "NX", "PX", args[1], "GET"};
  const absl::string_view exists[] = {"EXISTS", keys[1], keys[2]};
  const absl::string_view incr[] = {"INCR", keys[4]};
  const absl::string_view get[] = {"GET", keys[3]};
  const absl::string_view time[] = {"TIME"};
  const absl::Span<const absl::string_view> group[] = {set, exists, incr, get, time};
  auto tx = std::make_shared<WriteTx>();
  tx->transport = &transport;
  tx->timeout = timeout;
  tx->window_ms = window_ms;
  for (size_t i = 0; i < 5; ++i) tx->keys[i] = std::string(keys[i]);
  for (size_t i = 0; i < 4; ++i) tx->args[i] = std::string(args[i]);
  tx->on_reply = std::move(on_reply);
  absl::Status s = transport.SendTransaction(
      absl::MakeConstSpan(group, window_ms > 0 ? 5 : 4), timeout,
      [tx](absl::StatusOr<Reply> reply) { WriteTx::OnExec(tx, std::move(reply)); });
  if (!absl::IsUnimplemented(s)) return s;
  // No transactions on this transport: the whole acquire as one script.
  return WriteAcquireScript().Invoke(transport, keys, args, timeout, std::move(tx->on_reply));
}

}  // namespace dlock
