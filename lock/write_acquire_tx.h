// This header defines SendWriteAcquireTx: the read-write lock's writer
// acquire (read_write_lock.h; `dlock run` without --shared) without a script
// on its common path, as the plain lock's SendFencedAcquireTx
// (lease_command.h; bench/profiles/writertx.md). Internal to
// //lock:read_write_lock.
//
// KEYS: lock, readers, intent, data-set marker, fence mark; ARGV: token,
// ttl ms, window ms, intent ms (WriteAcquireScript's, read_write_scripts.h).
// Sends ONE transaction:
//
//   MULTI / SET lock token NX PX ttl GET / EXISTS readers intent /
//   INCR mark / GET marker / [TIME, only with a window] / EXEC
//
// MULTI/EXEC is atomic: nothing (no reader's acquire) runs between its
// commands, so EXISTS sees the readers as they were when SET took the key.
// EXEC's reply is read into what WriteAcquireScript would have answered:
//   - SET set the key, EXISTS found neither readers nor an intent, and the
//     fence INCR gave is valid (the rules of SendFencedAcquireTx: a trusted
//     marker, or above the marker x 1000; with a window, the fast path or
//     the full rule on the marker read): the fence. This is the script's
//     grant exactly: it too finds no readers hash, SETs, INCRs and deletes
//     an intent that is not there.
//   - anything else: WriteAfterTxScript runs, atomically, with the
//     transaction's fence, and its reply is the answer: live readers (our
//     key, if SET took it, is deleted again and the intent set), an intent
//     to delete, a refused SET (held or foreign data; the intent is set),
//     a fence or marker not valid, a young data set, an INCR error, or a
//     reply of another shape. Until it runs, our key keeps other writers,
//     plain holders and new readers out; no writer is granted while a
//     live reader holds. The refused transaction's INCR stays (fences need
//     only rise: a reader's fence stays >= every earlier writer's and <
//     every later one's).
// A transport without transactions (kUnimplemented: a cluster) gets
// WriteAcquireScript, as before. Each round trip is bounded by `timeout`.
// Returns the transport's rejection (then `on_reply` never runs); else
// `on_reply` runs once, never inside this call, with the keys. The views
// need to live only until this call returns. Loop thread only.
#ifndef DLOCK_LOCK_WRITE_ACQUIRE_TX_H_
#define DLOCK_LOCK_WRITE_ACQUIRE_TX_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/lock/lease_command.h"
#include "dlock/transport/transport.h"

namespace dlock {

absl::Status SendWriteAcquireTx(Transport& transport, absl::Span<const absl::string_view> keys,
                                absl::Span<const absl::string_view> args,
                                absl::Duration timeout, AcquireReplyHandler on_reply);

}  // namespace dlock

#endif  // DLOCK_LOCK_WRITE_ACQUIRE_TX_H_
