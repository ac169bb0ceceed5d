// This header defines `ReplyFromHiredis`, which copies a hiredis reply into
// an owned `dlock::Reply`, and `UseDlockReplies` / `TakeDlockReply`, which
// make a hiredis reader build its replies as `dlock::Reply` in the first
// place (no redisReply per reply or element, no copy).
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
struct redisReader;

namespace dlock {

// Returns an owned, deep copy of `reply` (which must not be null). Bulk and
// status strings keep every byte (NUL included, using the reply's length).
// RESP2 nil bulk strings and nil arrays both become `Reply::Nil()`.
Reply ReplyFromHiredis(const redisReply& reply);

// Makes `reader` build every reply as a `dlock::Reply` (hiredis 0.14's
// redisReplyObjectFunctions): the same Reply that ReplyFromHiredis would
// make, written straight from the read buffer. A reply's elements live in
// its own vector; the top-level object comes from a small free list of this
// thread, so a steady stream of replies allocates only what the Reply itself
// holds (strings longer than the small-string buffer, arrays' vectors).
//
// What the reader returns (redisReaderGetReply, a hiredis async reply
// callback's `reply`) is then such an object: take its Reply with
// TakeDlockReply; free it with the reader's own `fn->freeObject` (hiredis
// does for async callbacks), never with freeReplyObject. Its first member
// is a redisReply header that carries only `type` (and `str`/`len` of a
// status or error), enough for hiredis's check of a reply nobody asked for.
// Not for a hiredis async context that subscribes (hiredis reads pub/sub
// replies as redisReply trees). Call before the reader parses anything.
void UseDlockReplies(redisReader* reader);

// Moves the Reply out of `obj`, a top-level object of a reader set up with
// UseDlockReplies (which must not be null); `obj` must still be freed.
Reply TakeDlockReply(void* obj);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_REPLY_H_
