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
void install_interrupt_handlers();

// Whether one of those signals has arrived (async-signal-safe to read, lock-free).
bool interrupt_requested();

// The number of the first signal that arrived, 0 if none.
int interrupt_signal();

// "SIGTERM", "SIGINT", "SIGUSR1"; "signal N" for any other number.
std::string signal_name(int signal_number);

// Forgets an arrived signal (tests only).
void clear_interrupt();

}  // namespace mpiddp
