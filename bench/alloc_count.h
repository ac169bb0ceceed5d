// This header reads the allocation counters kept by alloc_count.cc, which
// lock_bench links in: every malloc/calloc/realloc in the process (hiredis's,
// libuv's and the C++ runtime's included: `operator new` reaches malloc) and
// every `operator new` separately. aligned_alloc/posix_memalign are not
// counted (nothing on the measured paths uses them). Counts are process-wide
// and atomic (relaxed), so workers on other threads are counted too.
#ifndef DLOCK_BENCH_ALLOC_COUNT_H_
#define DLOCK_BENCH_ALLOC_COUNT_H_

#include <cstdint>

namespace dlock {
namespace bench {

struct AllocCounts {
  uint64_t mallocs = 0;  // malloc + calloc + realloc calls (new included)
  uint64_t news = 0;     // operator new / new[] calls
};

// Zero counts when alloc_count.cc is not linked in.
AllocCounts CurrentAllocCounts();

}  // namespace bench
}  // namespace dlock

#endif  // DLOCK_BENCH_ALLOC_COUNT_H_
