// This header defines the Lua scripts of the read-write lock
// (read_write_lock.h) and its extra keys. Each script is one atomic step
// on the server; they are listed in AllScripts() (scripts.h), so the
// differential test and the SHA-1 checks cover them.
//
// Keys of resource R with prefix P (all with the hash tag {R}):
//   P{R}                  the writer: a string holding its token, PX ttl --
//                         the SAME key as the plain lock (SimpleLock), so a
//                         writer and a plain holder exclude each other
//   P"fence-hwm"          the server's fence high-water mark, shared with
//                         every lock (script_prelude.h)
//   P{R}:readers          a hash {reader token -> expiry, server Unix ms},
//                         PEXPIREd to its latest reader's expiry; entries
//                         past their expiry are trimmed by every script
//   P{R}:writer-waiting   the writer-intent marker: a string (a waiting
//                         writer's token) with PX writer_intent_ms; while it
//                         exists no new reader gets in
//   P"data-set-began"     the data-set marker (keys.h)
//   P{R}:released         the release channel (an ARGV)
//
//   script                 | KEYS              | ARGV               | reply
//   -----------------------+-------------------+--------------------+----------------------
//   ReadAcquireScript      | lock, readers,    | token, ttl_ms,     | the server's last fence
//                          | intent, data-set, | window_ms          | (>= 0), nil when a writer
//                          | mark              |                    | holds or waits, or a refusal
//   WriteAcquireScript     | lock, readers,    | token, ttl_ms,     | the new fence (>= 1), nil
//                          | intent, data-set, | window_ms,         | when a writer or a live
//                          | mark              | intent_ms          | reader holds, or a refusal
//   WriteAfterTxScript     | as WriteAcquire-  | as WriteAcquire-   | as WriteAcquireScript
//                          | Script            | Script, tx fence   | (the writer's rare path
//                          |                   |                    | after its transaction:
//                          |                   |                    | write_acquire_tx.h)
//   ReadReleaseScript      | readers           | token, channel     | 1 released (the last one
//                          |                   |                    | publishes), 0 not owner,
//                          |                   |                    | or the PUBLISH error (*)
//   ReadExtendScript       | readers           | token, ttl_ms      | 1 expiry = now + ttl,
//                          |                   |                    | 0 not owner
//
// The writer releases and extends with ReleaseScript / ExtendScript
// (scripts.h): its key is the plain lock's. Refusals are the acquire
// scripts' of scripts.h ({'young', ...}, {'foreign', ...}, {'exhausted',
// ...}); a readers hash or intent key of another type fails the script
// (WRONGTYPE: kInternal).
//
// A reader whose entry is past its expiry (server time) no longer owns it:
// release and extend answer 0 for it, like an expired lock key.
// (*) as in scripts.h: the hash entry was deleted, the PUBLISH refused.
//
// Thread-safe: the Script objects are immutable and live forever.
#ifndef DLOCK_LOCK_READ_WRITE_SCRIPTS_H_
#define DLOCK_LOCK_READ_WRITE_SCRIPTS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "dlock/lock/keys.h"
#include "dlock/transport/script.h"

namespace dlock {

const Script& ReadAcquireScript();
const Script& WriteAcquireScript();
const Script& WriteAfterTxScript();
const Script& ReadReleaseScript();
const Script& ReadExtendScript();

// P{R}:readers and P{R}:writer-waiting (see above).
std::string ReadersKey(const KeyScheme& keys, absl::string_view resource);
std::string WriterIntentKey(const KeyScheme& keys, absl::string_view resource);

}  // namespace dlock

#endif  // DLOCK_LOCK_READ_WRITE_SCRIPTS_H_
