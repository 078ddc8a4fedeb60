#pragma once
// Terminating signals as a flag. A batch system ends a job by SIGTERM (or the signal that
// `sbatch --signal` names, often SIGUSR1) some time before SIGKILL; the handler only records
// that a signal came, and the code that can act safely polls for it: the trainer at its step
// boundaries (to stop every rank together and checkpoint), the watchdog thread (to write the
// flight recorder while the main thread may be stuck in a collective). Nothing here is MPI.
#include <string>

namespace mpiddp {

// Installs the handler for SIGTERM, SIGINT and SIGUSR1 (idempotent). A second signal while
// the first is handled changes nothing: the flag is set once, the first signal is kept (a
// batch system often sends several: SIGUSR1 ahead of the time limit, SIGTERM at it, to each
// process of the job), and the handler only says on stderr that the stop is under way.
// The signals are blocked in the calling thread (and so in the threads it creates later) and
// taken by a thread of their own (Note [no signals in the compute threads] in
// src/core/interrupt.cpp): call it from the main thread before the compute threads start.
void install_interrupt_handlers();

// Sends `signal_number` to the process, as kill -TERM from outside does, and returns once its
// handler has run (fault injection's "signal"; raise() would leave it blocked on this thread):
// true, or false when it had not run after 10 s.
bool raise_interrupt(int signal_number);

// Calls `start` with SIGTERM, SIGINT and SIGUSR1 blocked in the calling thread, then restores
// its mask: threads that `start` creates inherit the block and never run the handler. For the
// compute threads (core/threads.hpp, Note [no signals in the compute threads] in
// src/core/interrupt.cpp), also where the caller never installed the handlers.
void with_interrupts_blocked(void (*start)(int), int argument);

// Whether one of those signals has arrived (async-signal-safe to read, lock-free).
bool interrupt_requested();

// The number of the first signal that arrived, 0 if none.
int interrupt_signal();

// "SIGTERM", "SIGINT", "SIGUSR1"; "signal N" for any other number.
std::string signal_name(int signal_number);

// Forgets an arrived signal (tests only).
void clear_interrupt();

}  // namespace mpiddp
