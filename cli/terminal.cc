#include "dlock/cli/terminal.h"

#include <signal.h>
#include <unistd.h>

namespace dlock {
namespace cli {

void TerminalHandover::NoteJob() {
  // A job of an interactive shell (dlock leads its process group, which is
  // the terminal's foreground group): the command's group gets the
  // terminal (it may read it; ^C and ^Z reach it) until it is gone, or it
  // would be stopped by SIGTTIN at its first read. Otherwise (e.g. dlock in
  // a shell script) the terminal stays with dlock's group, so a ^C still
  // stops the script too, and is handed over only if the command does need
  // it (OnCommandStopped).
  if (isatty(STDIN_FILENO) && getpgrp() == getpid() && tcgetpgrp(STDIN_FILENO) == getpgrp()) {
    tty_fd_ = STDIN_FILENO;
  }
}

void TerminalHandover::HandTo(pid_t pgid) {
  if (tty_fd_ < 0) return;
  if (tcsetpgrp(tty_fd_, pgid) == 0) {
    owned_by_group_ = true;
  } else {
    tty_fd_ = -1;
  }
}

void TerminalHandover::TakeBack() {
  if (tty_fd_ < 0 || !owned_by_group_) return;
  owned_by_group_ = false;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &old);
  tcsetpgrp(tty_fd_, getpgrp());
  sigprocmask(SIG_SETMASK, &old, nullptr);
}

bool TerminalHandover::OnCommandStopped(int signum, pid_t pgid) {
  const bool tty = isatty(STDIN_FILENO) == 1;
  const bool needs_tty = tty && (signum == SIGTTIN || signum == SIGTTOU);
  if (!owned_by_group_ && !needs_tty) return false;
  const bool dlock_has_tty = tty && tcgetpgrp(STDIN_FILENO) == getpgrp();
  if (owned_by_group_ || !dlock_has_tty) {
    TakeBack();
    raise(SIGSTOP);
    // Continued (fg or bg).
  }
  if (tty && tcgetpgrp(STDIN_FILENO) == getpgrp() && tcsetpgrp(STDIN_FILENO, pgid) == 0) {
    tty_fd_ = STDIN_FILENO;
    owned_by_group_ = true;
  }
  return true;
}

}  // namespace cli
}  // namespace dlock
