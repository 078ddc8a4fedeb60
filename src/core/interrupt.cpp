#include "mpiddp/core/interrupt.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <cerrno>
#include <csignal>

namespace mpiddp {
namespace {

// Lock-free, so both the handler's store and the pollers' loads are async-signal-safe.
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_signal(int signal_number) {
  int expected = 0;
  if (first_signal.compare_exchange_strong(expected, signal_number)) return;
  // A repeated signal: say that it was heard (write(2) is async-signal-safe; errno is the
  // interrupted code's and must survive). The stop already under way is not disturbed.
  static constexpr char kAgain[] =
      "mpiddp: another terminating signal: still stopping cleanly at the next step "
      "boundary (kill -9 stops at once)\n";
  const int saved_errno = errno;
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, kAgain, sizeof kAgain - 1);
  errno = saved_errno;
}

// The signals that stop a run at a step boundary.
constexpr int kTerminatingSignals[] = {SIGTERM, SIGINT, SIGUSR1};

sigset_t terminating_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kTerminatingSignals) sigaddset(&set, s);
  return set;
}

// The thread that takes the signals (Note [no signals in the compute threads]): it only
// waits, with the signals unblocked, and the handler runs on it.
void wait_for_signals() {
  const sigset_t set = terminating_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  for (;;) pause();
}

}  // namespace

// Note [no signals in the compute threads]
// A process-directed signal runs its handler on any thread that does not block it. When that
// was the main thread in the middle of a oneDNN product on 2 OpenMP threads, the run aborted
// with a corrupted heap inside dnnl_sgemm ("corrupted size vs. prev_size while consolidating"),
// nearly every time under a storm of SIGTERMs (tests/cli/interrupt.sh; a Zen 5 with oneDNN
// 2.6.3: with 1 thread, with Eigen or with OpenBLAS it did not, nor with the signals blocked in
// the compute threads). The handler only sets a flag and writes to stderr, both
// async-signal-safe, so what breaks is the interrupted code, and the remedy is that no thread
// that computes takes a signal: the main thread blocks them here, OpenMP's team inherits the
// block from it (and use_threads creates its team with them blocked in any case), and one
// thread of ours takes them, with the handler. MPI's service threads may too; they compute
// nothing. A signal sent to the process reaches that thread; raise() would send it to the
// calling thread, where it stays blocked: raise_interrupt sends it to the process.
void install_interrupt_handlers() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESTART: a read or write interrupted by the signal goes on; the flag is polled later.
    action.sa_flags = SA_RESTART;
    for (int s : kTerminatingSignals) sigaction(s, &action, nullptr);
    std::thread(wait_for_signals).detach();
  });
  const sigset_t set = terminating_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // the calling thread computes
}

void with_interrupts_blocked(void (*start)(int), int argument) {
  const sigset_t set = terminating_signals();
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  start(argument);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

bool raise_interrupt(int signal_number) {
  ::kill(::getpid(), signal_number);
  // Taken by another thread: wait until its handler has run, as raise() returns after it.
  for (int waited = 0; waited < 100000 && interrupt_signal() == 0; ++waited) ::usleep(100);
  return interrupt_signal() != 0;
}

bool interrupt_requested() { return first_signal.load(std::memory_order_relaxed) != 0; }

int interrupt_signal() { return first_signal.load(std::memory_order_relaxed); }

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(signal_number);
  }
}

void clear_interrupt() { first_signal.store(0, std::memory_order_relaxed); }

}  // namespace mpiddp
