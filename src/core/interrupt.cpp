#include "mpiddp/core/interrupt.hpp"

#include <unistd.h>

#include <atomic>
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

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read or write interrupted by the signal goes on; the flag is polled later.
  action.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
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
