#include "dlock/tests/torture/worker_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dlock {
namespace torture {

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

std::string TempRoot() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string base = t != nullptr && *t ? t : "/tmp";
  std::string tmpl = base + "/torture.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) return "";
  return buf.data();
}

std::string ReadTail(const std::string& path, size_t max) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max ? s.substr(s.size() - max) : s;
}

SharedFlags::~SharedFlags() {
  if (slots != nullptr) munmap(slots, 4096);
}

absl::Status SharedFlags::Create(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", strerror(errno)));
  if (ftruncate(fd, 4096) != 0) {
    close(fd);
    return absl::InternalError("ftruncate");
  }
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return absl::InternalError("mmap");
  slots = static_cast<std::atomic<int32_t>*>(p);
  return absl::OkStatus();
}

absl::Status SpawnWorker(const std::string& path, const std::vector<std::string>& args,
                         const std::string& err_path, WorkerProcess* w) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err_fd < 0) return absl::InternalError("open worker stderr");
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(err_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(err_fd, 2);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(err_fd);
  w->pid = pid;
  w->err = err_path;
  w->exited = false;
  w->status = 0;
  return absl::OkStatus();
}

void StopWorker(WorkerProcess* w) {
  if (w->pid <= 0 || w->exited) return;
  kill(w->pid, SIGCONT);
  kill(w->pid, SIGTERM);
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    int st;
    pid_t r = waitpid(w->pid, &st, WNOHANG);
    if (r == w->pid) {
      if (WIFEXITED(st) || WIFSIGNALED(st)) {
        w->status = st;
        w->exited = true;
        return;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(w->pid, SIGKILL);
  waitpid(w->pid, &w->status, 0);
  w->exited = true;
}

void KillWorker(WorkerProcess* w) {
  if (w->pid <= 0 || w->exited) return;
  kill(w->pid, SIGKILL);
  waitpid(w->pid, &w->status, 0);
  w->exited = true;
}

bool WaitStopped(WorkerProcess* w) {
  int st;
  pid_t r = waitpid(w->pid, &st, WUNTRACED);
  if (r == w->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
    w->status = st;
    w->exited = true;
    return false;
  }
  return r == w->pid && WIFSTOPPED(st);
}

absl::Status CheckWorkerExit(const WorkerProcess& w, const std::string& name) {
  if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("worker ", name, " ended with status ", w.status, ": ", ReadTail(w.err)));
}

}  // namespace torture
}  // namespace dlock
