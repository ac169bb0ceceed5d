// This header defines the process plumbing the torture drivers share
// (torture_driver.cc, primitive_driver.cc) and their workers: a scratch
// directory, log writes, the shared
// page the workers publish their phase in, fork/exec of a worker with its
// stderr in a file, stopping it, and waiting for a SIGSTOP to land.
//
// Times: MonotonicNanos() is CLOCK_MONOTONIC, which every process of the
// machine shares (uv_hrtime, and so UvEventLoop::Now(), reads the same
// clock), so intervals stamped by different workers and by the driver can
// be compared.
//
// Not thread-safe; for the driver's own thread.
#ifndef DLOCK_TESTS_TORTURE_WORKER_PROCESSES_H_
#define DLOCK_TESTS_TORTURE_WORKER_PROCESSES_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dlock {
namespace torture {

int64_t MonotonicNanos();

// Writes all of `s` to `fd` (a worker's O_APPEND log); gives up on an error.
void WriteAll(int fd, const std::string& s);

// A fresh directory under $TEST_TMPDIR (else /tmp); "" when it cannot be
// made.
std::string TempRoot();

// The last `max` bytes of the file at `path` ("" when unreadable).
std::string ReadTail(const std::string& path, size_t max = 1500);

// A 4096-byte page of int32 slots shared with the workers (mmap of a file,
// which the workers map by path).
struct SharedFlags {
  std::atomic<int32_t>* slots = nullptr;
  ~SharedFlags();
  // kInternal when the file cannot be created or mapped.
  absl::Status Create(const std::string& path);
};

// One worker process, our child.
struct WorkerProcess {
  pid_t pid = -1;
  std::string log;
  std::string err;
  int status = 0;
  bool exited = false;
};

// OK when `w` (worker `name`) exited with status 0; kInternal with its
// status and the tail of its stderr otherwise.
absl::Status CheckWorkerExit(const WorkerProcess& w, const std::string& name);

// fork + exec `path` with `args`, stderr to `err_path`; the child dies with
// the driver (PR_SET_PDEATHSIG). kInternal when the file or fork fails.
absl::Status SpawnWorker(const std::string& path, const std::vector<std::string>& args,
                         const std::string& err_path, WorkerProcess* w);

// SIGCONT, SIGTERM, wait up to 10 s for it to exit, then SIGKILL.
void StopWorker(WorkerProcess* w);

// kill -9 and reap.
void KillWorker(WorkerProcess* w);

// Waits until `w` has stopped after a SIGSTOP; false (and its exit status
// recorded, so a crash is reported, not lost) when it exited instead.
bool WaitStopped(WorkerProcess* w);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_WORKER_PROCESSES_H_
