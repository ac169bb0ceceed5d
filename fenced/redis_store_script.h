// This header defines the Lua script behind the Redis fenced store
// (redis_store.h): a fence check, the checks of every operation, then the
// fence record and the operations, in one atomic script. Exposed for the
// store and for the differential test that runs it on FakeRedis and on a
// real redis-server; not part of the API.
//
// KEYS[1]     the resource's fence record: a string holding the highest
//             fence written (decimal), no TTL.
// KEYS[1 + i] the data key of operation i (i = 1..n).
// ARGV[1]     the caller's fence (decimal, 1 .. 2^53 - 1);
// then, per operation, in order:
//   set  VALUE PX_MS       (PX_MS "0": no TTL; a string or no key)
//   hset N F1 V1 .. FN VN  (a hash or no key)
//   incr DELTA FLOOR       (FLOOR "" = none; a string holding an integer,
//                           or no key = 0; |value| stays <= 2^53 - 1)
//   del                    (any type)
//
// Replies (an array; the first element says which):
//   {'applied', n, r1 .. rn}   the fence was recorded (raised if higher)
//                              and every operation applied: r = 1 for set,
//                              new fields for hset, the new value for incr,
//                              keys deleted (0/1) for del.
//   {'stale', 0, H}            fence < H, the highest recorded: nothing
//                              written.
//   {'wrongtype', i, TYPE}     operation i's key holds another type.
//   {'notint', i, RAW}         incr on a string that is not an integer.
//   {'floor', i, CURRENT}      incr would take the value below its floor.
//   {'range', i, CURRENT}      incr would leave +-(2^53 - 1).
//   {'foreign', 0, TYPE}       the fence record is not a fence.
// Every refusal comes before the first write: nothing is applied, the fence
// is not recorded (Redis scripts do not roll back, so the checks come first).
#ifndef DLOCK_FENCED_REDIS_STORE_SCRIPT_H_
#define DLOCK_FENCED_REDIS_STORE_SCRIPT_H_

#include "dlock/transport/script.h"

namespace dlock {
namespace fenced {

const Script& FencedRedisWriteScript();

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_REDIS_STORE_SCRIPT_H_
