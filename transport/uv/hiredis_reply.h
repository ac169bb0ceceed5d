// This header defines `ReplyFromHiredis`, which copies a hiredis reply into
// an owned `dlock::Reply`.
//
// hiredis replies live only as long as the callback (async API) or until
// `freeReplyObject` (sync API); dlock never keeps one, it copies it here.
//
// Part of //transport/uv: only this package touches hiredis. The test helper
// //testing:redis_server uses it for its synchronous connection.
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_REPLY_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_REPLY_H_

#include "dlock/transport/reply.h"

struct redisReply;

namespace dlock {

// Returns an owned, deep copy of `reply` (which must not be null). Bulk and
// status strings keep every byte (NUL included, using the reply's length).
// RESP2 nil bulk strings and nil arrays both become `Reply::Nil()`.
Reply ReplyFromHiredis(const redisReply& reply);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_REPLY_H_
