#include "dlock/cli/process_group.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "dlock/cli/exit_codes.h"

extern char** environ;

namespace dlock {
namespace cli {
namespace {

// Writes one byte (retrying on EINTR).
void WriteByte(int fd, char byte) {
  ssize_t w;
  do {
    w = write(fd, &byte, 1);
  } while (w < 0 && errno == EINTR);
}

// In the forked child: becomes its group's leader, waits for the go, execs.
// Async-signal-safe calls only (forked from a process with threads).
[[noreturn]] void ChildMain(pid_t parent, int death_signal, const int go[2], int report,
                            char** argv, char** env) {
  if (death_signal != 0) prctl(PR_SET_PDEATHSIG, death_signal);
  if (getppid() != parent) _exit(kExitInternal);  // dlock already gone
  close(go[1]);
  // A process group of its own: dlock signals the whole group, so a
  // script's background jobs and subprocesses are stopped too.
  setpgid(0, 0);
  char byte = 0;
  ssize_t got;
  do {
    got = read(go[0], &byte, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) _exit(kExitInternal);  // dlock died before the go
  // Keep stdio and the report pipe; drop dlock's Redis sockets.
  syscall(SYS_close_range, 3u, static_cast<unsigned>(report) - 1, 0u);
  syscall(SYS_close_range, static_cast<unsigned>(report) + 1, ~0u, 0u);
  // Ignored signals stay ignored across exec: restore what dlock changed.
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  environ = env;
  execvp(argv[0], argv);
  int err = errno;
  ssize_t ignored = write(report, &err, sizeof(err));
  (void)ignored;
  _exit(kExitNotFound);
}

}  // namespace

Spawned SpawnInGroup(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int death_signal, absl::FunctionRef<void(pid_t)> in_group,
                     absl::FunctionRef<void()> exec_failed) {
  // Everything the child needs is prepared before the fork: after it, the
  // child makes only async-signal-safe calls.
  std::vector<std::string> env_copy = env, args = argv;
  std::vector<char*> envp, argp;
  for (std::string& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  // report: the child's exec errno (EOF once exec succeeded). go: the child
  // waits for one byte before exec, i.e. until its process group exists and
  // the watcher is in place; EOF (dlock died) makes it exit.
  int report[2], go[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "dlock: pipe: %s\n", std::strerror(errno));
    return Spawned{};
  }
  if (pipe2(go, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "dlock: pipe: %s\n", std::strerror(errno));
    close(report[0]);
    close(report[1]);
    return Spawned{};
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    ChildMain(parent, death_signal, go, report[1], argp.data(), envp.data());
  }
  const int fork_errno = errno;
  close(report[1]);
  close(go[0]);
  if (pid > 0) {
    // Both sides set the group, so it exists whoever runs first.
    setpgid(pid, pid);
    in_group(pid);
    WriteByte(go[1], 1);
  }
  close(go[1]);
  int exec_errno = 0;
  ssize_t n = pid < 0 ? -1 : 0;
  if (pid > 0) {
    // Returns 0 (EOF) once exec succeeded (the pipe is close-on-exec).
    do {
      n = read(report[0], &exec_errno, sizeof(exec_errno));
    } while (n < 0 && errno == EINTR);
  }
  close(report[0]);
  if (pid > 0 && n <= 0) return Spawned{pid, 0};
  const int err = pid < 0 ? fork_errno : exec_errno;
  if (pid > 0) {
    exec_failed();  // the child never ran anything
    int st;
    waitpid(pid, &st, 0);
  }
  std::fprintf(stderr, "dlock: cannot run %s: %s\n", argv[0].c_str(), std::strerror(err));
  return Spawned{-1, err};
}

bool GroupAlive(pid_t pgid, pid_t except) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return false;
  bool alive = false;
  while (struct dirent* entry = readdir(dir)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == except) continue;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) S ppid pgrp ..."; comm may hold spaces and parens.
    const char* paren = std::strrchr(buf, ')');
    if (paren == nullptr) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      alive = true;
      break;
    }
  }
  closedir(dir);
  return alive;
}

}  // namespace cli
}  // namespace dlock
