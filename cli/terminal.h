// This header defines `TerminalHandover`: who has the controlling terminal
// while `dlock run`'s command runs in its own process group.
//
// When dlock is a job of an interactive shell (it leads its process group,
// the terminal's foreground group), the command's group is made the
// foreground group (tcsetpgrp) until the direct child exits, so it can read
// the terminal and ^C / ^Z reach it; a stopped command stops dlock too (job
// control works as for any command). Elsewhere (dlock inside a script run
// from a terminal) the terminal stays with dlock's group -- a ^C interrupts
// the script, and dlock forwards it -- unless the command stops on
// SIGTTIN/SIGTTOU (it reads the terminal or sets its modes): then the
// terminal is handed to it as well.
//
// Thread-compatible; dlock calls it from its loop's thread only.
#ifndef DLOCK_CLI_TERMINAL_H_
#define DLOCK_CLI_TERMINAL_H_

#include <sys/types.h>

namespace dlock {
namespace cli {

class TerminalHandover {
 public:
  // Before the command's fork: notes whether dlock is an interactive job
  // (then the command's group will get the terminal).
  void NoteJob();
  // After the fork: hands the terminal to group `pgid` if NoteJob found a
  // job.
  void HandTo(pid_t pgid);
  // Gives the terminal back to dlock's own process group (if it was handed
  // to the command's). dlock is then a background process: SIGTTOU is
  // blocked around the call, as POSIX allows. Idempotent.
  void TakeBack();
  // The command's direct child (leader of group `pgid`) stopped with
  // `signum`. Returns true when the group is to be continued (SIGCONT):
  //   ^Z while the command has the terminal, or a read/mode change of the
  //   terminal (SIGTTIN/SIGTTOU) while dlock is in the background: dlock
  //   stops itself too, so the shell sees a stopped job and has the
  //   terminal; `fg` continues dlock, which goes on below.
  //   SIGTTIN/SIGTTOU while dlock's group has the terminal (dlock in the
  //   foreground): the command needs the terminal, it gets it.
  // Then the terminal goes to the command's group if dlock's group has it.
  // Other stops (SIGSTOP from elsewhere, no terminal): false, left alone.
  bool OnCommandStopped(int signum, pid_t pgid);

 private:
  int tty_fd_ = -1;  // the terminal handed to the command's group, or -1
  bool owned_by_group_ = false;
};

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_TERMINAL_H_
